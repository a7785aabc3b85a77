"""The verifier's exceptions.

Every error the verifier raises on purpose derives from one root, so that the
plugin and the CLI can turn it into one clear line::

    VerifierError
     +-- ConfigError            a bad option or setting
     +-- CaseDataError          a case file that does not load or validate
     +-- EndpointError          the endpoint could not be used
     |    +-- EndpointUnreachable   no connection could be made
     |    +-- EndpointTimeout       no (complete) answer within the timeout
     |    +-- EndpointAuthError     the key was rejected (401/403)
     |    +-- EndpointStatusError   a retryable status (429, 5xx) outlived the retries
     |    +-- EndpointProtocolError the answer could not be read as HTTP/SSE at all
     +-- SigningError           a key or a signature that does not load or verify

Messages name the thing to fix. They never contain the API key: the client
redacts it before an exception is built.
"""

from __future__ import annotations


class VerifierError(Exception):
    """Base class of every error the verifier raises on purpose."""


class ConfigError(VerifierError):
    """A command-line option or setting is invalid."""


class CaseDataError(VerifierError):
    """A case file is malformed or violates its schema.

    Args:
        path: the case file.
        line: 1-based line number, or None for a whole-file problem.
        message: what is wrong, naming the JSON path where there is one.
    """

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"


class EndpointError(VerifierError):
    """The endpoint could not be used to answer a request.

    Args:
        message: one line that says what happened and, where possible, what to fix.
        attempts: how many attempts were made before giving up.
    """

    code = "endpoint_error"

    def __init__(self, message: str, *, attempts: int = 1) -> None:
        self.message = message
        self.attempts = attempts
        super().__init__(message)


class EndpointUnreachable(EndpointError):
    """No connection could be made (refused, DNS, reset before an answer)."""

    code = "unreachable"


class EndpointTimeout(EndpointError):
    """The endpoint did not answer, or stopped answering, within the timeout."""

    code = "timeout"


class EndpointAuthError(EndpointError):
    """The endpoint rejected the key (401 or 403)."""

    code = "auth"


class EndpointStatusError(EndpointError):
    """A retryable HTTP status (429 or 5xx) was still returned after the last retry."""

    code = "http_status"

    def __init__(self, message: str, *, status: int, attempts: int = 1) -> None:
        self.status = status
        super().__init__(message, attempts=attempts)


class EndpointProtocolError(EndpointError):
    """The connection broke in a way that left no readable HTTP answer."""

    code = "protocol"


class SigningError(VerifierError):
    """A signing key or a signed envelope does not load or does not verify."""
