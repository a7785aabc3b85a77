"""Hooks other pytest plugins implement to extend a verification run.

A plugin (an installed package with a ``pytest11`` entry point, a ``conftest.py``, or ``-p
MODULE``) that defines ``pytest_verifier_register_families`` adds check families: each a
:class:`~verifier.checks.registry.Family` whose ``run`` is an exchange (it yields requests and
returns the outcome, sending nothing itself), with its own case folder and case schema::

    def pytest_verifier_register_families(registry):
        registry.register(Family("echo", run=echo, cases=HERE / "cases", case_schema=SCHEMA))

Its cases are then selected with ``--families``, graded, journalled and scored like the
built-in families'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .checks.registry import Registry

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_verifier_register_families(registry: Registry) -> None:
    """Register further check families in `registry`.

    Called once per process when ``--endpoint`` is given, before ``--families`` is checked.
    """
