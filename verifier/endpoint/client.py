"""The one HTTP path to the endpoint: the openai SDK, our retries, the transcript.

Every request the verifier sends goes through :class:`EndpointClient`. It uses
the official openai SDK for the HTTP work (auth header, base URL, timeouts,
status errors) but asks it for the raw response, so that grading sees exactly
what the server sent: the body bytes of a non-stream answer, the SSE bytes of a
stream. Retries are ours, not the SDK's, so that every attempt is written to
the transcript with its number, and so that ``Retry-After`` and the retry
budget are visible and bounded.

Translation of transport failures happens here and only here: a fault that
outlives the retries becomes an :class:`~verifier.errors.EndpointError`, which
the executor turns into an ``error`` outcome, never a ``fail``. Each attempt's
transcript record names its fault kind (:data:`FAULT_KINDS`), so that the
scorecard can count what the transport did.

A chat answer of HTTP 200 whose body is not JSON is retried like a transport
hiccup (a proxy's error page, a body cut by a middlebox); one that is still not
JSON after the last retry is returned, so that grading reports it as a failure
of its own (``non_json_body``): a vendor that always answers so is broken, not
unlucky. A 200 whose body is JSON but not a chat completion is never retried:
the answer checks grade it.
"""

from __future__ import annotations

import email.utils
import random
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx2
import openai

from ..errors import (
    EndpointAuthError,
    EndpointError,
    EndpointProtocolError,
    EndpointStatusError,
    EndpointTimeout,
    EndpointUnreachable,
)
from ..protocol.answers import ChatResult, parse_body, parse_completion
from ..protocol.apis import ANTHROPIC_VERSION, COUNT_ROUTES, ROUTES, Protocol, protocol_of
from ..protocol.requests import Chat, Count, Get, Post, Raw, Request, Retry
from .redaction import Redactor, redact_url, secret_query_values, split_credentials
from .transcript import Transcript

# Sent when no key is configured: servers without auth ignore it, the SDK needs one.
NO_KEY = "no-key"
RETRY_AFTER_CAP = 60.0
# What can go wrong with one attempt, as the transcript's ``fault`` field names it.
FAULT_KINDS = (
    "http_429",
    "http_5xx",
    "timeout",
    "reset",
    "truncated_stream",
    "non_json_body",
    "unreachable",
)


def fault_end(record: Mapping[str, Any]) -> str | None:
    """What became of a transcript attempt's fault, read the one way the scorecard counts it.

    ``retried`` when another attempt followed it, ``gave_up`` when it was the request's last;
    None for an attempt without a fault.
    """
    if record.get("fault") not in FAULT_KINDS:
        return None
    return "retried" if record.get("retry") else "gave_up"


# A server error to a request built to be bad is taken as the request's own once this many
# attempts of requests that had to be answered were answered, and none met a fault.
STEADY_AFTER = 16


class Steadiness:
    """Whether the endpoint has answered every request it had to, so far (thread-safe).

    One fault on such a request (any kind) marks it unsteady for the rest of the run: its
    server errors may then be its own, whatever was asked, and get the whole retry ladder.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clean = 0
        self._faulted = False

    def record(self, fault: str | None, *, counted: bool = True) -> None:
        """Count one attempt of a request that had to be answered (nothing unless `counted`)."""
        if not counted:
            return
        with self._lock:
            if fault is None:
                self._clean += 1
            else:
                self._faulted = True

    @property
    def steady(self) -> bool:
        """Enough answered attempts, and no fault among them."""
        with self._lock:
            return not self._faulted and self._clean >= STEADY_AFTER


def _attempt_record(
    label: str, attempt: int, url: str, body: dict[str, Any] | None, stream: bool
) -> dict[str, Any]:
    """An attempt's transcript record as it starts (what came back is added to it)."""
    return {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "label": label,
        "attempt": attempt,
        "method": "GET" if body is None else "POST",
        "url": url,
        "stream": stream,
        "request": body,
    }


class _StreamBroken(Exception):
    """A stream that broke off after its answer began; its cause is the transport error.

    Carries what arrived (status, headers, the chunks so far) into the transcript.
    """

    def __init__(self, partial: ChatResult) -> None:
        super().__init__("the stream broke off")
        self.partial = partial


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def describe_transport(exc: BaseException) -> str:
    """A short lower-case reason for a transport failure (``connection refused``)."""
    for current in _causes(exc):
        if isinstance(current, ssl.SSLCertVerificationError):
            return (
                f"tls certificate not trusted ({current.verify_message}); --insecure skips "
                f"the check, for an endpoint you trust"
            )
        if isinstance(current, OSError) and current.strerror:
            return current.strerror.lower()
    text = str(exc).strip() or type(exc).__name__
    if "] " in text and text.startswith("["):
        text = text.split("] ", 1)[1]
    return text.lower()


def retry_after_seconds(headers: httpx2.Headers | dict[str, str]) -> float | None:
    """The server's requested wait from ``retry-after-ms`` or ``Retry-After`` (seconds or date)."""
    getter = headers.get
    millis = getter("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = getter("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(when.tzinfo or UTC)).total_seconds())


def transport_fault(exc: BaseException, *, stream_started: bool) -> str:
    """The fault kind of a failed attempt: timeout, unreachable, reset or truncated_stream.

    ``reset``: the connection broke after it was made (reset by the peer, or closed in
    the middle of a body); ``truncated_stream``: a stream whose answer had begun ended
    before its end, without a reset (no [DONE], no end of the HTTP body).
    """
    chain = _causes(exc)
    if any(isinstance(e, openai.APITimeoutError | httpx2.TimeoutException) for e in chain):
        return "timeout"
    broke = httpx2.ReadError | httpx2.WriteError | httpx2.RemoteProtocolError
    if not any(isinstance(e, broke) for e in chain):
        return "unreachable"
    if stream_started and not any(isinstance(e, ConnectionResetError) for e in chain):
        return "truncated_stream"
    return "reset"


def answer_fault(result: ChatResult, *, non_json: bool) -> str | None:
    """The fault kind of an HTTP answer that is to be retried, or None when it stands.

    Args:
        result: the answer.
        non_json: a 2xx body that is not JSON counts as a fault (chat completions).
    """
    if result.status == 429:
        return "http_429"
    if result.status >= 500:
        return "http_5xx"
    if non_json and result.ok and any(p.code == "body_not_json" for p in result.problems):
        return "non_json_body"
    return None


# Reads an answer from the response, its redacted headers and when the request was sent
# (time.perf_counter()).
_Reader = Callable[[httpx2.Response, dict[str, str], float], ChatResult]


def _whole_body(parse: Callable[[int, bytes, dict[str, str]], ChatResult]) -> _Reader:
    """A reader that parses the whole body with `parse`."""

    def read(response: httpx2.Response, headers: dict[str, str], started: float) -> ChatResult:
        return parse(response.status_code, response.read(), headers)

    return read


def _event_stream(protocol: Protocol) -> _Reader:
    """A reader of `protocol`'s streamed answers, accumulated from their SSE events, timed."""

    def read(response: httpx2.Response, headers: dict[str, str], started: float) -> ChatResult:
        """The answer; its token events timed.

        Raises:
            _StreamBroken: the stream broke off; its cause is the transport error.
        """
        if "text/event-stream" not in response.headers.get("content-type", ""):
            # Not SSE at all (a JSON body, an error page): read it as a plain answer.
            result = protocol.parse_answer(response.status_code, response.read(), headers)
            result.stream = True
            return result
        result = ChatResult(
            stream=True, status=response.status_code, headers=headers, api=protocol.api
        )
        try:
            return protocol.accumulate(
                response.iter_bytes(), result, clock=lambda: time.perf_counter() - started
            )
        except httpx2.TransportError as exc:
            raise _StreamBroken(result) from exc

    return read


def timing_record(result: ChatResult) -> dict[str, Any]:
    """When the answer's headers and (streamed) its token chunks arrived, in ms from sending.

    The performance section derives time to first token, inter-token gaps and decode rates
    from these (:mod:`verifier.scorecard.request_figures`).
    """

    def ms(seconds: float) -> float:
        return round(seconds * 1000, 1)

    timing: dict[str, Any] = {"first_byte_ms": ms(result.first_byte or 0.0)}
    if result.stream and result.token_arrivals:
        timing["tokens_ms"] = [ms(t) for t in result.token_arrivals]
    if result.first_reasoning is not None:
        timing["first_reasoning_ms"] = ms(result.first_reasoning)
    return timing


class EndpointClient:
    """Sends chat-completions requests and returns :class:`ChatResult` objects.

    Args:
        base_url: the API base URL, ending in ``/v1`` (or the vendor's own base path).
        api_key: the key, or None when the endpoint needs none.
        api_key_env: the name of the variable the key came from, for messages.
        timeout: seconds allowed for connecting and for each read.
        max_retries: retries after the first attempt for connection errors,
            timeouts, 429 and 5xx.
        backoff: the first retry's wait in seconds; doubled each retry, jittered.
        transcript: where every attempt is recorded.
        sleep: the sleep function (tests pass a fake one).
        insecure: do not verify the server's TLS certificate (``--insecure``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        transcript: Transcript | None = None,
        sleep: Callable[[float], None] = time.sleep,
        insecure: bool = False,
    ) -> None:
        self.base_url = base_url
        self.display_url = redact_url(base_url)
        self.has_key = api_key is not None
        self.api_key_env = api_key_env
        self.max_retries = max_retries
        self.backoff = backoff
        self.timeout = timeout
        self.redactor = Redactor(
            [api_key, httpx2.URL(base_url).password, *secret_query_values(base_url)]
        )
        self.transcript = transcript or Transcript(None, self.redactor)
        self._sleep = sleep
        self._random = random.Random()
        self.steadiness = Steadiness()
        sdk_base, query = split_credentials(base_url)
        self._sdk = openai.OpenAI(
            api_key=api_key or NO_KEY,
            base_url=sdk_base,
            default_query=query or None,
            timeout=httpx2.Timeout(timeout),
            max_retries=0,
            # No redirect is followed: a verifier must not send the key (or grade) another
            # host than the one it was given; a 3xx is reported as what it is.
            http_client=openai.DefaultHttpxClient(
                verify=not insecure, follow_redirects=False, timeout=httpx2.Timeout(timeout)
            ),
        )

    def close(self) -> None:
        """Close the HTTP connections."""
        self._sdk.close()

    def chat(
        self,
        request: dict[str, Any],
        *,
        stream: bool = False,
        label: str = "",
        keep_persistent_5xx: bool = False,
        api: str = "chat",
    ) -> ChatResult:
        """POST ``/chat/completions`` and return the answer, retrying transport faults.

        Args:
            request: the JSON body, sent as given (``stream`` and, for streams,
                ``stream_options.include_usage`` are set here).
            stream: stream the answer with SSE.
            label: names the case and request in the transcript.
            keep_persistent_5xx: return a 5xx that outlived the retries as a
                result instead of raising (for requests that must be rejected
                with a 4xx: a persistent 5xx is then the finding).
            api: the API to send it through: another than ``chat`` gets the request its
                protocol module renders from this chat body, at its own route, and its
                answer is read by that module into the same terms.

        Returns:
            The answer, whatever its status, once it is not a retryable fault; a
            2xx body that is still not JSON after the last retry is returned too.

        Raises:
            EndpointError: the endpoint could not be reached, timed out, broke off
                its answer, rejected the key, or kept answering 429/5xx through
                every retry.
            NotExpressible: `api` cannot say what the chat body asks (before any request).
        """
        protocol = protocol_of(api)
        body = dict(request)
        if api != "chat":
            body = protocol.request_body(body, stream=stream)
        elif stream:
            body["stream"] = True
            options = dict(body.get("stream_options") or {})
            options.setdefault("include_usage", True)
            body["stream_options"] = options
        else:
            body.pop("stream", None)
        return self._with_retries(
            lambda: self._send_api(protocol, body, stream),
            body=body,
            stream=stream,
            label=label,
            keep_persistent_5xx=keep_persistent_5xx,
            url=f"{self.display_url}{ROUTES[api]}",
            retry_non_json=True,
            must_answer=not keep_persistent_5xx,
            parse=protocol.parse_answer,
        )

    def post_raw(
        self,
        content: bytes,
        *,
        content_type: str,
        label: str = "",
        stream: bool = False,
        retry: Retry = "ladder",
        api: str = "chat",
    ) -> ChatResult:
        """POST bytes as they are to `api`'s route (for malformed-request checks).

        A 5xx that outlives the retries is returned, not raised: for a request that
        must be rejected, the server error is the finding. With `stream` (the bytes ask for
        one) an answer is read as a stream. `retry` is the request's (:class:`Raw`): with
        ``quick``, a server error gets one immediate retry while the endpoint is steady
        (:class:`Steadiness`), the ladder otherwise; with ``none`` the first answer stands.
        The API's own headers go with the bytes, and its protocol module reads the answer.
        """
        protocol = protocol_of(api)
        return self._with_retries(
            lambda: self._send(
                lambda: self._sdk.post(
                    ROUTES[api],
                    content=content,
                    options={"headers": {**self._api_headers(api), "Content-Type": content_type}},
                    cast_to=httpx2.Response,
                    stream=stream,
                ),
                _event_stream(protocol) if stream else _whole_body(protocol.parse_answer),
            ),
            body={"raw": content.decode("utf-8", "replace"), "content_type": content_type},
            stream=stream,
            label=label,
            keep_persistent_5xx=True,
            url=f"{self.display_url}{ROUTES[api]}",
            retry_non_json=True,
            retries=0 if retry == "none" else None,
            quick_5xx=retry == "quick",
            parse=protocol.parse_answer,
        )

    @property
    def root_url(self) -> str:
        """The server root: the base URL without its trailing ``/v1`` (where /tokenize lives)."""
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def post_json(self, url: str, body: dict[str, Any], *, label: str = "") -> ChatResult:
        """POST JSON to a path of the base URL or an absolute URL; any status is returned.

        For the tokenizer endpoints servers add beside the OpenAI API (/tokenize,
        /detokenize, /apply-template): a 404 means the server has none.
        """
        return self._with_retries(
            lambda: self._send(
                lambda: self._sdk.post(url, body=body, cast_to=httpx2.Response),
                _whole_body(parse_body),
            ),
            body=body,
            stream=False,
            label=label,
            keep_persistent_5xx=True,
            url=self._shown(url),
        )

    def count_tokens(self, request: dict[str, Any], *, api: str, label: str = "") -> ChatResult:
        """POST `api`'s token-counting route with the request it renders from a chat body.

        Any status is returned (a 404 means the endpoint has no such route); the answer's
        JSON is in ``body``.

        Raises:
            EndpointError: as :meth:`post_json`.
            NotExpressible: `api` cannot say what the chat body asks.
            KeyError: `api` has no counting route (chat).
        """
        route = COUNT_ROUTES[api]
        protocol = protocol_of(api)
        assert protocol.count_body is not None
        body = protocol.count_body(protocol.request_body(dict(request), stream=False))
        read = _whole_body(parse_body)
        return self._with_retries(
            lambda: self._send_api(protocol, body, False, route=route, read=read),
            body=body,
            stream=False,
            label=label,
            keep_persistent_5xx=True,
            url=f"{self.display_url}{route}",
        )

    def get(self, path: str, *, label: str = "") -> ChatResult:
        """GET a path of the base URL (``/models``) or an absolute URL, parsed as JSON."""
        return self._with_retries(
            lambda: self._send(
                lambda: self._sdk.get(path, cast_to=httpx2.Response), _whole_body(parse_body)
            ),
            body=None,
            stream=False,
            label=label,
            keep_persistent_5xx=False,
            url=self._shown(path),
        )

    def send(self, request: Request, label: str, api: str = "chat") -> ChatResult:
        """Send a request a family or the probe described, labelled `label` in the transcript.

        A chat request goes through `api` (see :meth:`chat`), raw bytes to its route; the
        others are the chat API's own.
        """
        match request:
            case Chat():
                return self.chat(
                    dict(request.body),
                    stream=request.stream,
                    label=label,
                    keep_persistent_5xx=request.keep_persistent_5xx,
                    api=api,
                )
            case Raw():
                return self.post_raw(
                    request.content,
                    content_type=request.content_type,
                    label=label,
                    stream=request.stream,
                    retry=request.retry,
                    api=api,
                )
            case Post():
                return self.post_json(
                    f"{self.root_url}{request.route}", dict(request.body), label=label
                )
            case Count():
                return self.count_tokens(dict(request.body), api=api, label=label)
            case Get():
                where = request.route if request.api else f"{self.root_url}{request.route}"
                return self.get(where, label=label)

    def _shown(self, url: str) -> str:
        """`url` (a path of the base URL, or absolute) as the transcript records it."""
        if url.startswith(("http://", "https://")):
            return self.redactor.text(redact_url(url))
        return f"{self.display_url}{url}"

    def _send_api(
        self,
        protocol: Protocol,
        body: dict[str, Any],
        stream: bool,
        *,
        route: str | None = None,
        read: _Reader | None = None,
    ) -> ChatResult:
        """POST the body to the API's route (or `route`, another of its routes).

        A stream is read event by event, any other answer whole (by `read`, if given).
        """
        headers = self._api_headers(protocol.api)
        return self._send(
            lambda: self._sdk.post(
                route or ROUTES[protocol.api],
                body=body,
                cast_to=httpx2.Response,
                stream=stream,
                options={"headers": headers},
            ),
            read or (_event_stream(protocol) if stream else _whole_body(protocol.parse_answer)),
        )

    def _api_headers(self, api: str) -> dict[str, str]:
        """The headers `api` asks for beyond the bearer token (Messages' version and key)."""
        if api != "messages":
            return {}
        # The Messages API's own headers (the key also goes as the bearer token, which the
        # servers that speak both APIs read).
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.has_key:
            headers["x-api-key"] = self._sdk.api_key
        return headers

    def _send(self, respond: Callable[[], httpx2.Response], read: _Reader) -> ChatResult:
        """Send with `respond` and read the answer with `read`, timed; the response is closed."""
        started = time.perf_counter()
        response = respond()
        first_byte = time.perf_counter() - started
        try:
            headers = self.redactor.headers(response.headers.multi_items())
            result = read(response, headers, started)
        finally:
            response.close()
        result.latency = time.perf_counter() - started
        result.first_byte = first_byte
        return result

    def _with_retries(
        self,
        send: Callable[[], ChatResult],
        *,
        body: dict[str, Any] | None,
        stream: bool,
        label: str,
        keep_persistent_5xx: bool,
        url: str,
        retry_non_json: bool = False,
        retries: int | None = None,
        quick_5xx: bool = False,
        must_answer: bool = False,
        parse: Callable[[int, bytes, dict[str, str]], ChatResult] = parse_completion,
    ) -> ChatResult:
        """Call `send` until its answer stands or the retries run out; record every attempt.

        `retries` overrides the client's ``max_retries`` for this request. With `quick_5xx`,
        a server error while the endpoint is steady gets one immediate retry, not the
        ladder. Each attempt of a request that `must_answer` counts in the client's steadiness.
        `parse` reads an answer the SDK raised as a status error (the API's own error shape).

        Raises:
            EndpointError: a transport failure or a 429/5xx outlived the retries (a
                persistent 5xx is returned instead with `keep_persistent_5xx`), or the
                endpoint rejected the key.
        """
        attempts = (self.max_retries if retries is None else retries) + 1
        for attempt in range(1, attempts + 1):
            started = time.perf_counter()
            final = attempt == attempts
            record = _attempt_record(label, attempt, url, body, stream)
            try:
                result = send()
            except openai.APIStatusError as exc:
                result = self._status_answer(exc, stream, started, parse)
            except Exception as exc:  # noqa: BLE001 - translated below, re-raised if unknown
                error = self._record_failure(exc, record, attempt, started, final)
                self.steadiness.record(record["fault"], counted=must_answer)
                if final:
                    raise error from None
                self._sleep(self._delay(attempt, None))
                continue
            if quick := quick_5xx and result.status >= 500 and self.steadiness.steady:
                # The request's own server error: one more attempt, sent at once, is the last.
                attempts = min(attempts, attempt + 1)
                final = attempt == attempts
            fault = self._record_answer(result, record, attempt, final, retry_non_json)
            self.steadiness.record(fault, counted=must_answer)
            if fault is None:
                return result
            if final:
                if fault == "non_json_body" or (keep_persistent_5xx and result.status >= 500):
                    return result
                raise self._persistent(result, attempt)
            if not quick:
                wait = retry_after_seconds(result.headers) if result.status == 429 else None
                self._sleep(self._delay(attempt, wait))
        raise AssertionError("unreachable: the loop returns or raises")

    def _persistent(self, result: ChatResult, attempts: int) -> EndpointStatusError:
        """The error of a 429 or 5xx that every one of the request's attempts got."""
        return EndpointStatusError(
            f"{self.display_url} answered HTTP {result.status} to all {attempts} attempts",
            status=result.status,
            attempts=attempts,
        )

    def _status_answer(
        self,
        exc: openai.APIStatusError,
        stream: bool,
        started: float,
        parse: Callable[[int, bytes, dict[str, str]], ChatResult],
    ) -> ChatResult:
        """The answer the SDK raised as a status error, as a result like any other."""
        result = parse(
            exc.status_code,
            exc.response.read(),
            self.redactor.headers(exc.response.headers.multi_items()),
        )
        result.stream = stream
        result.latency = time.perf_counter() - started
        return result

    def _record_failure(
        self, exc: Exception, record: dict[str, Any], attempt: int, started: float, final: bool
    ) -> EndpointError:
        """Write the record of an attempt that got no answer; the error it is, to raise if final.

        Raises:
            Exception: `exc` itself when it is no transport failure (a bug of ours).
        """
        partial: ChatResult | None = None
        cause: BaseException = exc
        if isinstance(exc, _StreamBroken) and exc.__cause__ is not None:
            partial, cause = exc.partial, exc.__cause__
        kind = transport_fault(cause, stream_started=partial is not None)
        error = self._translate(cause, attempt, kind)
        record.update(
            status=partial.status if partial else None,
            headers=partial.headers if partial else None,
            # What arrived before the break, as evidence of where it broke.
            response=partial.chunks if partial else None,
            error=f"{type(error).__name__}: {error.message}",
            fault=kind,
            latency_ms=round((time.perf_counter() - started) * 1000, 3),
            retry=not final,
        )
        self.transcript.write(record)
        return error

    def _record_answer(
        self,
        result: ChatResult,
        record: dict[str, Any],
        attempt: int,
        final: bool,
        retry_non_json: bool,
    ) -> str | None:
        """Write the record of an answered attempt; its fault kind, None when the answer stands.

        Raises:
            EndpointAuthError: the answer is a 401 or 403.
        """
        result.attempts = attempt
        fault = answer_fault(result, non_json=retry_non_json)
        record.update(
            status=result.status,
            headers=result.headers,
            response=result.chunks if result.stream and result.chunks else result.body,
            problems=[p.code for p in result.problems] or None,
            fault=fault,
            latency_ms=round(result.latency * 1000, 3),
            retry=fault is not None and not final,
        )
        if result.first_byte is not None:
            record["timing"] = timing_record(result)
        self.transcript.write(record)
        if result.status in (401, 403):
            raise EndpointAuthError(self._auth_message(result.status), attempts=attempt)
        return fault

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, RETRY_AFTER_CAP)
        # Exponential backoff with jitter: [0.5, 1] x base x 2^(attempt-1), capped.
        ceiling: float = min(self.backoff * 2 ** (attempt - 1), 30.0)
        return ceiling * (0.5 + self._random.random() / 2)

    def _auth_message(self, status: int) -> str:
        if not self.has_key:
            return (
                f"the endpoint requires a key ({status}) and ${self.api_key_env} is not set: "
                f"export it, or name another variable with --api-key-env"
            )
        return f"the endpoint rejected the key in ${self.api_key_env} ({status})"

    def _translate(self, exc: BaseException, attempt: int, kind: str) -> EndpointError:
        """Map SDK and httpx exceptions of fault `kind` to the verifier's, without the key.

        Raises:
            BaseException: `exc` itself when it is no transport failure (a bug of ours).
        """
        if not isinstance(exc, openai.APIConnectionError | httpx2.TransportError):
            raise exc
        reason = self.redactor.text(describe_transport(exc))
        where = self.display_url
        if kind == "timeout":
            return EndpointTimeout(
                f"{where} did not answer within {self.timeout:g}s", attempts=attempt
            )
        if kind == "unreachable":
            return EndpointUnreachable(f"cannot reach {where}: {reason}", attempts=attempt)
        return EndpointProtocolError(f"{where} broke off the answer: {reason}", attempts=attempt)
