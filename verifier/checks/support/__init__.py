"""What the check families share: grading helpers, output accounting, one way to run a sub-check.

Nothing here is a family: the families are the modules of :mod:`verifier.checks` itself.
"""
