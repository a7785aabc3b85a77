"""What the simulated model reads back from a long prompt: a needle's code, a long count.

The test double answers a haystack's question from the prompt it was given, as a model that
retrieves perfectly does: the code the needle states, when the needle is in the part of the
prompt the vendor kept; else that it cannot find it. Asked to count to a number, it counts,
so that an answer runs to its cap.
"""

from __future__ import annotations

from collections.abc import Callable

from ..checks.support import haystack

NOT_FOUND = "I cannot find that vault in the notes."


def recalled(question: str, seen: Callable[[], str]) -> str | None:
    """The answer to the user's last text `question`, read from the prompt `seen` gives.

    None when the question is not about a haystack (another rule answers it).
    """
    if haystack.asked(question) is not None:
        # The question the model reads is the prompt's it was served (a cache may serve
        # another's).
        text = seen()
        name = haystack.asked(text)
        return (haystack.stated(text, name) if name else None) or NOT_FOUND
    if question.rstrip().endswith(haystack.COUNT_QUESTION):
        return "\n".join(str(n) for n in range(1, 5001))
    return None
