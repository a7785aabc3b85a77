"""What is said on the wire, as data: requests, answers, the tokenizer routes.

Nothing here sends a request: the endpoint client does, and families only describe them.
"""
