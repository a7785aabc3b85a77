"""Keeping secrets out of everything the verifier writes or prints."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[REDACTED]"

# Query parameters that commonly carry credentials (api_key, key, token, sig, ...).
_SECRET_PARAM = re.compile(r"(key|token|secret|sig|signature|password|auth)", re.IGNORECASE)
# Headers never recorded, whatever their value.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie"}
)


def redact_url(url: str) -> str:
    """The URL without userinfo and with secret-looking query values replaced."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        # A malformed port: keep host and port text as given, minus any userinfo.
        netloc = parts.netloc.rpartition("@")[2]
    else:
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host if port is None else f"{host}:{port}"
    query = parts.query
    if query:
        pairs = [
            (k, REDACTED if _SECRET_PARAM.search(k) else v)
            for k, v in parse_qsl(query, keep_blank_values=True)
        ]
        query = urlencode(pairs, safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def secret_query_values(url: str) -> list[str]:
    """The values of the URL's secret-looking query parameters (to redact wherever they go)."""
    query = urlsplit(url).query
    return [v for k, v in parse_qsl(query, keep_blank_values=True) if _SECRET_PARAM.search(k)]


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """The URL without userinfo and query, and its query parameters.

    The SDK appends paths to its base URL, so a query must travel as parameters of each
    request; userinfo is dropped, since the key is sent as a Bearer token, never as the
    URL's Basic credentials.
    """
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    base = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return base, dict(parse_qsl(parts.query, keep_blank_values=True))


class Redactor:
    """Replaces known secret values anywhere in strings and JSON-like structures.

    Args:
        secrets: the exact values to hide (the API key, URL passwords). Empty
            values and values shorter than 4 characters are ignored, since
            replacing them would mangle ordinary text.
    """

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def text(self, value: str) -> str:
        """`value` with every secret replaced."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def data(self, value: Any) -> Any:
        """A copy of a JSON-like value with every secret replaced in keys and strings."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def headers(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """Headers as a dict, without credential headers and with secrets replaced."""
        return {k.lower(): self.text(v) for k, v in headers if k.lower() not in SECRET_HEADERS}
