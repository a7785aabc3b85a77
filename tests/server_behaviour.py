"""What the real servers are observed to do, shared by the real-server test files."""

from __future__ import annotations

from verifier.reference.profiles import Profile
from verifier.reference.tokenizer_backends import encode_all_special

# What llama-server does wrong on the wire, observed, the same for every template and process
# (request parsing and streaming live in tools/server/, not in the chat handlers).
WIRE_DEFECTS = {
    # Answered 200 as if valid: an empty messages array, a role that does not exist, a model
    # the server does not serve (the single-model server ignores "model"), a tool message
    # answering a call never made, a JSON body sent as text/plain, and stop given as a number.
    "invalid-empty-messages": "invalid_request_accepted",
    "invalid-wrong-role": "invalid_request_accepted",
    "invalid-unknown-model": "invalid_request_accepted",
    "invalid-tool-result-without-call": "invalid_request_accepted",
    "invalid-wrong-content-type": "invalid_request_accepted",
    "invalid-stop-number": "invalid_request_accepted",
    # A tool without its function object: HTTP 500, a server error for a client mistake.
    "invalid-tool-definition": "invalid_request_5xx",
    # n=2 streamed: one usage chunk per choice (each counting one choice), not one at the end.
    "n-2-stream": "usage_repeated",
    # n=2 and n=3 not streamed: usage bills one choice's tokens while n choices are delivered
    # (output accounting renders and counts every choice).
    "n-2": "completion_tokens_mismatch",
    "n-3": "completion_tokens_mismatch",
}


def spells_a_special_token(profile: Profile, text: str) -> bool:
    """The text holds special-token text of `profile`'s tokenizer, which a server could take
    as special."""
    messages = [{"role": "user", "content": text}]
    return profile.prompt_ids(messages) != encode_all_special(
        profile.tokenizer, profile.render(messages).text
    )
