"""Comparing scorecards of several vendors: reading the inputs and building the comparison.

Modules: ``inputs`` (scorecards and signed envelopes, signature status), ``tables`` (the
comparison's data and how cells are ranked), ``measures`` (scorecard values as measures),
``families`` (key sub-metrics and drill-downs per family), ``views`` (the whole comparison).
Rendering lives in ``verifier.render``. The package imports none of them: a run renders its
scorecard with a few (``families``, ``measures``), and reading signed inputs needs the
signature code, which a run without ``--sign-key`` never loads.
"""
