"""Conformance and vendor verification for OpenAI-compatible chat-completions endpoints.

The public API, for tools that read or build on the verifier's results::

    from verifier import Outcome, Status, Finding, load_profile, build_scorecard

Names are imported on first use, so that ``import verifier`` (done by pytest for every
session, through the plugin) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Each public name and the module that defines it.
_EXPORTS = {
    "Outcome": "verifier.outcome",
    "Status": "verifier.outcome",
    "Finding": "verifier.outcome",
    "VerifierError": "verifier.errors",
    "ConfigError": "verifier.errors",
    "CaseDataError": "verifier.errors",
    "EndpointError": "verifier.errors",
    "EndpointUnreachable": "verifier.errors",
    "EndpointTimeout": "verifier.errors",
    "EndpointAuthError": "verifier.errors",
    "EndpointStatusError": "verifier.errors",
    "EndpointProtocolError": "verifier.errors",
    "SigningError": "verifier.errors",
    "SignatureError": "verifier.scorecard.signing",
    "load_profile": "verifier.reference.profiles",
    "Profile": "verifier.reference.profiles",
    "build_scorecard": "verifier.scorecard.build",
    "verify_envelope": "verifier.scorecard.signing",
    "Chat": "verifier.protocol.requests",
    "Raw": "verifier.protocol.requests",
    "Post": "verifier.protocol.requests",
    "Get": "verifier.protocol.requests",
    "Exchange": "verifier.protocol.requests",
    "ChatResult": "verifier.protocol.answers",
    "FAMILIES": "verifier.checks",
    "Case": "verifier.cases.corpus",
    "Family": "verifier.checks.registry",
    "Registry": "verifier.checks.registry",
    "RunContext": "verifier.checks.registry",
    "family": "verifier.checks.registry",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'verifier' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
