"""A check family from outside the package, registered through the verifier's hook.

It asks for short answers and grades ``finish_reason`` against each case's expectation: the
test of ``verifier.hookspecs`` (loaded with ``-p echo_family``).
"""

from __future__ import annotations

from pathlib import Path

from verifier import Case, Chat, Exchange, Family, Finding, Outcome, Registry, RunContext

SCHEMA = {
    "type": "object",
    "required": ["id", "prompt", "max_tokens", "finish_reason"],
    "properties": {
        "id": {"type": "string"},
        "prompt": {"type": "string"},
        "max_tokens": {"type": "integer", "minimum": 1},
        "finish_reason": {"enum": ["stop", "length"]},
    },
    "additionalProperties": False,
}


def run(case: Case, ctx: RunContext) -> Exchange:
    """One answer; its finish_reason must be the case's."""
    body = ctx.request(
        messages=[{"role": "user", "content": case.data["prompt"]}],
        max_tokens=case.data["max_tokens"],
    )
    answer = yield Chat(body, "answer")
    got = answer.choice.finish_reason if answer.choice else None
    findings = []
    if got != case.data["finish_reason"]:
        findings.append(
            Finding(
                "finish_reason_unexpected",
                f"finish_reason {got!r}, expected {case.data['finish_reason']!r}",
                expected=case.data["finish_reason"],
                actual=got,
            )
        )
    return Outcome.from_findings(findings, metrics={"requests": 1})


def pytest_verifier_register_families(registry: Registry) -> None:
    """Register the echo family with its own cases and schema."""
    registry.register(
        Family(
            "echo",
            run,
            description="finish_reason as the case expects",
            cases=Path(__file__).parent / "echo_cases" / "echo",
            case_schema=SCHEMA,
        )
    )
