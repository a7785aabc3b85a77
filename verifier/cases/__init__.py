"""The case corpus: loading the case files, and cases generated from a JSON-Schema strategy."""
