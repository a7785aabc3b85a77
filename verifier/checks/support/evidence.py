"""No evidence, no verdict: what an answer must carry before a check may read it (pure).

Every family grades an answer only through these functions, so that one rule holds everywhere:

- a 2xx answer whose shape cannot be read (a body that is not JSON, a broken stream) or that
  carries no choice is the endpoint's fault whatever the check: ``malformed_response``
  (``non_json_body`` for a body that is not JSON at all, which the client retried as a hiccup);
- a figure the API leaves optional (``usage.prompt_tokens``) that a check reads and the answer
  does not carry leaves the check without evidence: the case is unsupported, with
  :data:`NO_PROMPT_TOKENS` as its reason, unless what it did see already failed it. It is
  never a pass.
"""

from __future__ import annotations

from ...outcome import Finding
from ...protocol.answers import ChatResult

# Answers whose shape is so broken that nothing else can be graded.
UNREADABLE = frozenset(
    {"body_not_json", "not_a_completion", "no_choices", "chunk_not_json", "stream_error_event"}
)
# Why a check that reads usage.prompt_tokens decides nothing on an answer without it.
NO_PROMPT_TOKENS = "the answer has no usage.prompt_tokens"


def unreadable_findings(result: ChatResult, attempt: str | None) -> list[Finding]:
    """Findings for an answer whose shape prevents grading (garbage body, broken stream).

    A body that is not JSON at all is ``non_json_body`` (the client retried it as a
    hiccup; it persisted); any other unreadable shape is ``malformed_response``.
    """
    return [
        Finding(
            "non_json_body" if p.code == "body_not_json" else "malformed_response",
            p.message,
            json_path=p.where,
            attempt=attempt,
        )
        for p in result.problems
        if p.code in UNREADABLE
    ]


def evidence_findings(result: ChatResult, attempt: str | None) -> list[Finding]:
    """What a 2xx answer lacks before any check may read it: a readable shape and a choice.

    Empty when the answer carries a choice to grade; else the ``malformed_response`` (or
    ``non_json_body``) findings that fail the case instead of a pass.
    """
    broken = unreadable_findings(result, attempt)
    if broken or result.choice is not None:
        return broken
    return [Finding("malformed_response", "the answer has no choice", "$.choices", attempt=attempt)]


def prompt_tokens(result: ChatResult) -> int | None:
    """The answer's ``usage.prompt_tokens`` when it is a count, else None (no evidence)."""
    value = (result.usage or {}).get("prompt_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cached_tokens(result: ChatResult) -> int | None:
    """The part of the answer's prompt it says came from the cache, else None.

    Chat's ``cached_tokens``; Messages' ``cache_read_input_tokens``, as its protocol module
    reads it.
    """
    value = ((result.usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Malformed(Exception):
    """A 2xx answer a check needs cannot be read or carries no choice; `findings` say how."""

    def __init__(self, findings: list[Finding]) -> None:
        super().__init__(findings[0].message)
        self.findings = findings


def counted(result: ChatResult, attempt: str) -> int | None:
    """The ``usage.prompt_tokens`` of a 2xx answer, or None when it reports none.

    Raises:
        Malformed: the answer cannot be read or carries no choice.
    """
    broken = evidence_findings(result, attempt)
    if broken:
        raise Malformed(broken)
    return prompt_tokens(result)
