"""The simulated vendor's HTTP server: OpenAI-compatible chat completions over HTTP/1.1.

The same model answers Anthropic Messages (``/v1/messages``) and OpenAI Responses
(``/v1/responses``), translated to and from chat completions (:mod:`.api_frontends`).
Standard library only (``http.server``), threaded, keep-alive; streams are
sent as SSE with chunked transfer encoding. Faults and defects from the
catalogue are applied here (transport, and the logprobs' perturbations that depend
on the vendor's state or settings) and in the model (behaviour).

Transport faults only ever hit the answering routes (chat completions, Messages,
Responses): the model list, the tokenizer and the token-counting routes stay clean, so
that the probe is not what a fault test measures.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import select
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from ..cases.rotation import Rotation
from ..reference.dialect import FIELDS as REASONING_FIELDS
from ..reference.profiles import Profile
from ..reference.tokenizer_backends import encode_all_special
from .api_frontends import (
    ANSWER_ROUTES,
    COUNT_ROUTES,
    MESSAGES,
    Ended,
    Quirks,
    StreamTranslator,
    Verbatim,
    answer_body,
    api_of,
    arguments_escaped,
    arguments_escaped_event,
    chat_request,
    count_body,
    cut_said_completed,
    cut_said_ended,
    error_answer,
    native_problem,
    stream_translator,
)
from .defects import (
    BAD_RESPONSE_FORMAT_500,
    CACHED_PREFIX_CHANGES_ANSWER,
    CACHED_TOKENS_UNREPORTED,
    COUNT_TOKENS_DROPS_TOOLS,
    ERROR_PARAM_WRONG,
    FAULT_429,
    FAULT_500,
    FAULT_GARBAGE,
    FAULT_RESET,
    FAULT_SLOW_STREAM,
    FAULT_TIMEOUT,
    HOLD_SECONDS,
    HTTP_429_RETRY_AFTER,
    HTTP_500_EVERY_3RD,
    INVALID_REQUEST_200,
    INVALID_REQUEST_500,
    INVALID_REQUEST_HANG,
    INVALID_REQUEST_POISONS,
    INVALID_REQUEST_SLOWS,
    KV_CACHE_DIVERGENCE,
    MESSAGES_BLOCKS_OVERLAP,
    MESSAGES_CACHE_CREATION_OMITTED,
    MESSAGES_CACHE_DOUBLE_COUNTED,
    MESSAGES_ERRORS_CHAT_SHAPED,
    MESSAGES_MAX_TOKENS_DEFAULTED,
    MESSAGES_NAMED_TOOL_CHOICE_LOST,
    MESSAGES_REDACTED_THINKING_EMPTY,
    MESSAGES_REDACTED_THINKING_REJECTED,
    MESSAGES_STOP_SEQUENCE_AS_END_TURN,
    MESSAGES_TEXT_NORMALISED,
    MESSAGES_THINKING_DROPPED,
    MESSAGES_THINKING_HISTORY_DROPPED,
    MESSAGES_THINKING_HISTORY_REJECTED,
    MESSAGES_THINKING_UNSIGNED,
    MISSING_REASONING_500,
    MISSING_REASONING_HANG,
    PREFIX_CACHE_COLLISION,
    RESPONSES_CUT_AS_COMPLETED,
    RESPONSES_EFFORT_DROPPED,
    RESPONSES_ENCRYPTED_CONTENT_EMPTY,
    RESPONSES_NAMED_TOOL_CHOICE_LOST,
    RESPONSES_REASONING_ITEMS_DROPPED,
    RESPONSES_REASONING_ITEMS_REJECTED,
    RESPONSES_STREAM_UNINDEXED,
    TOKENIZE_ENDPOINT_DISAGREES,
    TRANSLATED_ARGUMENTS_ESCAPED,
    VISION_INVALID_IMAGE_500,
    WEIGHTS_PERTURBED,
    Defect,
    Defects,
)
from .distribution import Perturbation, PromptMemory, prompt_digest
from .faults import InFlight, choose_fault
from .pace import Pace, tokens_in
from .prefix_cache import PREFILL, PrefixCache
from .prompt import CACHED, SERVED, STALE, PromptPath, normalised
from .rules import MODEL_ID, Path, Reply, ToyPath, respond
from .serving_window import admit, compacted
from .validation import Policy, Rejection, request_problem, with_declared_tools
from .wire_answers import completion_body, one_token_sampled, stream_events


def _quirks(defects: Defects, redacts: bool) -> Quirks:
    """How the vendor's Messages answers and translation depart from the reference.

    `redacts`: every thinking block comes redacted (the vendor's ``--redact-thinking``).
    """
    empty = defects.has(MESSAGES_REDACTED_THINKING_EMPTY)
    rejected = defects.has(MESSAGES_REDACTED_THINKING_REJECTED)
    return Quirks(
        double_counted=defects.has(MESSAGES_CACHE_DOUBLE_COUNTED),
        unsigned=defects.has(MESSAGES_THINKING_UNSIGNED),
        refuses_thinking=defects.has(MESSAGES_THINKING_HISTORY_REJECTED)
        or defects.has(RESPONSES_REASONING_ITEMS_REJECTED),
        creation_omitted=defects.has(MESSAGES_CACHE_CREATION_OMITTED),
        unsealed=defects.has(RESPONSES_ENCRYPTED_CONTENT_EMPTY),
        redacts=redacts or empty or rejected,
        redacted_empty=empty,
        refuses_redacted=rejected,
    )


def _unreasoned(message: dict[str, Any]) -> dict[str, Any]:
    """A chat message without the reasoning an assistant turn carries back."""
    return {key: value for key, value in message.items() if key not in REASONING_FIELDS}


# What fault-garbage answers: a proxy's error page, sent as if it were the JSON answer.
GARBAGE = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><center>upstream sent an invalid response</center></body></html>\n"
)
# How often a held request (fault-timeout) looks whether its client has hung up.
HOLD_POLL = 0.1
CHAT_ROUTE = "/v1/chat/completions"
# What the messages-max-tokens-defaulted defect fills in for a Messages request without one.
DEFAULT_MAX_TOKENS = 4096


def error_body(
    message: str, kind: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    """An OpenAI-shaped error object."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _not_json(constant: str) -> Any:
    """Python reads NaN and Infinity; JSON (RFC 8259) has no syntax for them."""
    raise ValueError(f"{constant} is not JSON")


@dataclasses.dataclass(frozen=True, slots=True)
class Answered:
    """A chat request and the model's reply to it, as the vendor is about to send it.

    Args:
        request: the request (with what the vendor's cache and window made of it).
        reply: the model's reply.
        number: the request's number.
        defects: the defects on for it (those under load included).
        perturbation: its logits' perturbation.
        native: the request as sent on the Messages or Responses route (None on chat's).
        fault: the fault that cuts its answer short, if any.
    """

    request: dict[str, Any]
    reply: Reply
    number: int
    defects: Defects
    perturbation: Perturbation
    native: Any
    fault: Defect | None


class SimulatorServer(ThreadingHTTPServer):
    """The simulated vendor: its settings and the counters its faults use.

    Args:
        address: (host, port); port 0 picks a free one.
        defects: the defects and faults switched on.
        latency: seconds to wait before answering each chat request.
        api_key: when set, requests must carry ``Authorization: Bearer <api_key>`` (or, on the
            Messages routes, ``x-api-key: <api_key>``).
        profile: a reference profile: prompts are rendered and counted with its template
            and tokenizer, and the tokenizer endpoints answer.
        tokenizer_api: which tokenizer endpoints a profiled vendor offers: ``vllm``
            (/tokenize with messages, return_token_ids), ``llamacpp`` (/apply-template,
            /tokenize with content, /detokenize, /props) or ``none``.
        vision: the vendor takes images; False makes it text-only (images refused, 400).
        served_model: the model id it serves (``/v1/models`` lists it, answers name it).
        fault_seed: the seed that decides which chat requests the seeded faults hit (and,
            with each request's number, its logit noise).
        logit_noise: the standard deviation of the noise on every logit of every answer, drawn
            anew for each request, as batch-dependent kernels give (0: none). The text is
            unchanged; only the logprobs move.
        pace: the time to first token and between tokens (see :mod:`.pace`).
        chat_only: serve chat completions alone: the Messages and Responses routes answer 404,
            as a vendor that speaks no other API.
        redact_thinking: over Messages, every thinking block comes as a redacted_thinking
            block, its thinking sealed in its data and taken up again when sent back, as the
            reference gives a block its safety systems flag (correct, not a defect).
        rotation: a secret rotation whose twins the model knows the calls of, as it knows
            the published cases' (a model generalises; the test double must be told).
        window: the context window it serves, in tokens (its model list states it as
            ``max_model_len``); None: the profile's (the release's), or none without one.
    """

    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        defects: Defects,
        latency: float = 0.0,
        api_key: str | None = None,
        profile: Profile | None = None,
        tokenizer_api: str = "vllm",
        vision: bool = True,
        served_model: str = MODEL_ID,
        fault_seed: int = 0,
        logit_noise: float = 0.0,
        pace: Pace | None = None,
        chat_only: bool = False,
        redact_thinking: bool = False,
        rotation: Rotation | None = None,
        window: int | None = None,
    ) -> None:
        self.path_model: Path = PromptPath(profile, defects) if profile else ToyPath(defects)
        # Set when the server closes, so that requests held by fault-timeout let go (before
        # binding: a failed bind closes the server at once).
        self.closing = threading.Event()
        super().__init__(address, Handler)
        self.defects = defects
        self.latency = latency
        self.api_key = api_key
        self.chat_only = chat_only
        self.redact_thinking = redact_thinking
        self.rotation = rotation
        self.profile = profile
        self.window = window if window is not None or profile is None else profile.window
        self.tokenizer_api = tokenizer_api if profile else "none"
        self.policy = Policy.of(profile, defects, vision=vision, model=served_model)
        self.fault_seed = fault_seed
        self.logit_noise = logit_noise
        self.pace = pace or Pace()
        self.in_flight = InFlight()
        # The prompts answered so far, for kv-cache-divergence's warm cache.
        self.prompts = PromptMemory()
        self.prefix_cache = PrefixCache()
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._poisoned = 0
        self._held = 0.0

    def server_close(self) -> None:
        """Let held requests go, then close the listening socket."""
        self.closing.set()
        super().server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (it timed out, or a test cut it) is not a server error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    @property
    def base_url(self) -> str:
        """The API base URL clients use."""
        host, port = self.server_address[:2]
        host = host if isinstance(host, str) else host.decode()
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/v1"

    def perturbation(self, request: dict[str, Any], number: int) -> Perturbation:
        """How the logprobs of chat request `number`, about to be answered, are moved.

        Under kv-cache-divergence the request's prompt counts as answered from now on.
        """
        weights = self.defects.param(WEIGHTS_PERTURBED)
        warm = self.defects.has(KV_CACHE_DIVERGENCE) and self.prompts.answered_before(
            prompt_digest(request)
        )
        return Perturbation(
            weights=float(weights) if weights is not None else 0.0,
            warm=warm,
            noise=self.logit_noise,
            seed=self.fault_seed,
            number=number,
        )

    def next_request_number(self) -> int:
        """Number the chat requests 1, 2, 3, ... (faults like every-3rd use it)."""
        with self._lock:
            return next(self._counter)

    def poison(self) -> None:
        """After a refused invalid request: fail the next N chat requests, or hold the next one.

        As invalid-request-poisons and invalid-request-slows ask; neither, nothing.
        """
        count = self.defects.param(INVALID_REQUEST_POISONS)
        held = self.defects.param(INVALID_REQUEST_SLOWS)
        with self._lock:
            if count is not None:
                self._poisoned = int(count)
            if held is not None:
                self._held = float(held)

    def poisoned(self) -> bool:
        """Whether this chat request is one a refused invalid request has poisoned."""
        with self._lock:
            if self._poisoned > 0:
                self._poisoned -= 1
                return True
            return False

    def held(self) -> float:
        """Seconds to hold this chat request, after a refused invalid request (then 0)."""
        with self._lock:
            seconds, self._held = self._held, 0.0
            return seconds


class Handler(BaseHTTPRequestHandler):
    """One connection; HTTP/1.1 so that clients can keep it alive."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, the second
    # waits for the client's delayed ACK (about 40 ms a request on loopback).
    disable_nagle_algorithm = True
    server: SimulatorServer
    server_version = "verifier-simulator"

    def parse_request(self) -> bool:
        """Note when the request arrived (for Server-Timing), then parse it."""
        self.arrived = time.perf_counter()
        return super().parse_request()

    def send_response(self, code: int, message: str | None = None) -> None:
        """Send the status line and, as ``Server-Timing``, the vendor's own time so far.

        Benchmarks tell the vendor's time from the client's with it (W3C Server Timing).
        """
        super().send_response(code, message)
        arrived = getattr(self, "arrived", None)  # unset when the request line was refused
        if arrived is not None:
            elapsed = (time.perf_counter() - arrived) * 1000
            self.send_header("Server-Timing", f"total;dur={elapsed:.1f}")

    @property
    def route(self) -> str:
        """The request's path without its query or a trailing slash."""
        return urlsplit(self.path).path.rstrip("/")

    @property
    def api(self) -> str | None:
        """The other API the route speaks (``messages``, ``responses``); None for chat."""
        return api_of(self.route)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet: the verifier's transcript is the record."""

    # -- plumbing ------------------------------------------------------------

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        """Send `body`; an error in the shape of the API the route speaks."""
        chat_shaped = self.api == "messages" and self.server.defects.has(
            MESSAGES_ERRORS_CHAT_SHAPED
        )
        if status >= 400 and not chat_shaped:
            body = error_answer(self.api, status, body)
        self._send_bytes(status, json.dumps(body).encode("utf-8"), headers)

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        headers: dict[str, str] | None = None,
        *,
        reset_after: int | None = None,
    ) -> None:
        """Send a JSON-typed answer; with `reset_after`, only that many body bytes, then RST."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if reset_after is None:
            self._write(data)
            return
        self._write(data[:reset_after])
        self._reset()

    def _write(self, data: bytes) -> None:
        """Write body bytes; under fault-slow-stream one byte at a time, each flushed."""
        if not self._slow():
            self.wfile.write(data)
            return
        for position in range(len(data)):
            self.wfile.write(data[position : position + 1])
            self.wfile.flush()

    def _slow(self) -> bool:
        return (
            self.server.defects.has(FAULT_SLOW_STREAM)
            and self.command == "POST"
            and self.route in (CHAT_ROUTE, *ANSWER_ROUTES)
        )

    def _reset(self) -> None:
        """Drop the connection with a TCP RST (SO_LINGER 0), as a crashing proxy does."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The request reader holds a reference to the socket; closing it first makes the
        # socket's close release the descriptor now, which is what sends the RST.
        self.rfile.close()
        self.connection.close()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _authorized(self) -> bool:
        expected = self.server.api_key
        if expected is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {expected}":
            return True
        if self.api == MESSAGES and self.headers.get("x-api-key") == expected:
            return True
        self._send_json(
            401,
            error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
        )
        return False

    # -- routes --------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """Models list and health."""
        if self.route == "/health":
            self._send_json(200, {"status": "ok"})
            return
        if not self._authorized():
            return
        if self.route == "/props" and self.server.tokenizer_api == "llamacpp":
            assert self.server.profile is not None
            self._send_json(200, {"chat_template": self.server.profile.template.source})
            return
        if self.route == "/v1/models":
            window = self.server.window
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.server.policy.model,
                            "object": "model",
                            "created": 0,
                            "owned_by": "simulator",
                            **({"max_model_len": window} if window else {}),
                        }
                    ],
                },
            )
            return
        self._send_json(404, error_body(f"no route GET {self.route}", code="not_found"))

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        """Chat completions, Messages and Responses (and their token counts)."""
        raw = self._read_body()
        if not self._authorized():
            return
        route = self.route
        if route in ("/tokenize", "/detokenize", "/apply-template"):
            self._tokenizer_endpoint(route, raw)
            return
        if self.api is not None and self.server.chat_only:
            self._send_json(404, error_body(f"no route POST {self.route}", code="not_found"))
            return
        if route in COUNT_ROUTES:
            self._count(raw)
            return
        if route != CHAT_ROUTE and route not in ANSWER_ROUTES:
            self._send_json(404, error_body(f"no route POST {self.route}", code="not_found"))
            return
        native: Any = None
        request: Any = None
        rejection: Rejection | None
        if "json" not in (self.headers.get("Content-Type") or ""):
            rejection = Rejection(415, "Content-Type must be application/json")
        else:
            try:
                native = json.loads(raw, parse_constant=_not_json)
            except (ValueError, UnicodeDecodeError):
                rejection = Rejection(400, "the request body is not valid JSON")
            else:
                request, rejection = self._translated(native)
        if rejection is not None and not self._tolerant():
            self._reject(rejection)
            self.server.poison()
            return
        if self.server.poisoned():
            self._send_json(500, error_body("the worker is restarting", "server_error"))
            return
        time.sleep(self.server.held())
        if rejection is not None:
            request = {
                "model": self.server.policy.model,
                "messages": [{"role": "user", "content": "?"}],
            }
        request = compacted(with_declared_tools(request, self.server.policy), self.server.defects)
        admitted = self._admitted(request)
        if admitted is None:
            return
        request = admitted
        number = self.server.next_request_number()
        with self.server.in_flight.enter() as position:
            self._answer(request, number, position, native)

    def _admitted(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """The request as the vendor's window lets it through; None when it was answered here."""
        path = self.server.path_model
        if self.server.window is None or not isinstance(path, PromptPath):
            return request
        prompt = len(path.prompt_ids(request)) + path.eyes.prompt_tokens(request)
        admission = admit(request, prompt, self.server.window, self.server.defects, self.api)
        if admission.error:
            self._send_json(
                500, error_body("internal error allocating the KV cache", "server_error")
            )
        elif admission.hold:
            self._hold()
        elif admission.rejection is not None:
            self._reject(admission.rejection)
        return admission.request

    def _translated(self, native: Any, *, counting: bool = False) -> tuple[Any, Rejection | None]:
        """The chat request a body asks for (itself, on the chat route), and why it is refused."""
        api = self.api
        defaulted = api == "messages" and self.server.defects.has(MESSAGES_MAX_TOKENS_DEFAULTED)
        if defaulted and isinstance(native, dict) and "max_tokens" not in native:
            native = {**native, "max_tokens": DEFAULT_MAX_TOKENS}
        quirks = _quirks(self.server.defects, self.server.redact_thinking)
        request = (
            native if api is None else chat_request(api, native, counting=counting, quirks=quirks)
        )
        if isinstance(request, Rejection):
            return None, request
        dialect = self.server.path_model.dialect
        if api is not None:
            # A vendor passes the API's reasoning settings on in the model's terms (a lossy
            # gateway drops some first).
            request = {k: v for k, v in request.items() if k not in self._dropped(api)}
            request = request if dialect is None else dialect.in_model_terms(request)
        # What the translation read, held to the API's reference (it names its own mistakes
        # first, in words of its own).
        refused = None if api is None or counting else native_problem(api, native)
        if refused is not None:
            return None, refused
        problem = request_problem(request, self.server.policy)
        if problem is not None and api is not None:
            # The chat request's field is not the API's own: a refusal names none.
            problem = dataclasses.replace(problem, param=None)
        return self._lossy(request, native), problem

    def _dropped(self, api: str) -> tuple[str, ...]:
        """The reasoning settings a lossy gateway loses in translation from `api`."""
        defects = self.server.defects
        if api == "messages" and defects.has(MESSAGES_THINKING_DROPPED):
            return ("thinking",)
        if api == "responses" and defects.has(RESPONSES_EFFORT_DROPPED):
            return ("reasoning_effort",)
        return ()

    def _lossy(self, request: dict[str, Any], native: Any) -> dict[str, Any]:
        """The translated request as a lossy gateway leaves it once it is taken.

        A named tool choice lost; the reasoning sent back left out of the prompt.
        """
        choice = native.get("tool_choice") if isinstance(native, dict) else None
        named = isinstance(choice, dict) and choice.get("type") in ("tool", "function")
        defects = self.server.defects
        dropped = {
            "messages": MESSAGES_THINKING_HISTORY_DROPPED,
            "responses": RESPONSES_REASONING_ITEMS_DROPPED,
        }.get(str(self.api))
        if dropped is not None and defects.has(dropped):
            request = {**request, "messages": [_unreasoned(m) for m in request["messages"]]}
        if self.api == "messages" and defects.has(MESSAGES_TEXT_NORMALISED):
            request = {
                **request,
                "messages": [
                    normalised(m) if m.get("role") == "user" else m for m in request["messages"]
                ],
            }
        if named and self.api == "messages" and defects.has(MESSAGES_NAMED_TOOL_CHOICE_LOST):
            return {**request, "tool_choice": "required"}
        if named and self.api == "responses" and defects.has(RESPONSES_NAMED_TOOL_CHOICE_LOST):
            return {**request, "tool_choice": "auto"}
        return request

    def _count(self, raw: bytes) -> None:
        """A token-counting route: the prompt tokens of the chat request the body asks for."""
        path, api = self.server.path_model, self.api
        if not isinstance(path, PromptPath) or api is None:
            self._send_json(404, error_body(f"no route POST {self.route}", code="not_found"))
            return
        try:
            native = json.loads(raw, parse_constant=_not_json)
        except (ValueError, UnicodeDecodeError):
            self._send_json(400, error_body("the request body is not valid JSON"))
            return
        request, rejection = self._translated(native, counting=True)
        if rejection is not None:
            error = error_body(rejection.message, code=rejection.code)
            error["error"]["param"] = rejection.param
            self._send_json(rejection.status, error)
            return
        if self.server.defects.has(COUNT_TOKENS_DROPS_TOOLS):
            request = {k: v for k, v in request.items() if k not in ("tools", "tool_choice")}
        tokens = path.prompt_tokens(with_declared_tools(request, self.server.policy))
        self._send_json(200, count_body(api, tokens))

    def _answer(self, request: dict[str, Any], number: int, position: int, native: Any) -> None:
        """Answer chat request `number`, which arrived as the `position`-th in flight.

        On the Messages and Responses routes the answer is translated into theirs (`native`:
        the request as sent).
        """
        server = self.server
        stream = bool(request.get("stream"))
        fault = choose_fault(server.defects, server.fault_seed, number, stream=stream)
        if self._fault(number, fault):
            return
        if server.latency:
            time.sleep(server.latency)
        defects = server.defects.at_position(position)
        request, prefill = self._cached(request, defects)
        perturbation = server.perturbation(request, number)
        reply = one_token_sampled(
            request,
            respond(request, defects, number, server.path_model, server.rotation),
            number,
            perturbation,
        )
        answered = Answered(request, reply, number, defects, perturbation, native, fault)
        if stream:
            # The prompt's computing comes before the stream's first byte, where a client sees it.
            time.sleep(prefill)
            self._answer_stream(answered)
        else:
            self._answer_whole(answered)

    def _answer_stream(self, answered: Answered) -> None:
        """Send a reply as a stream of events (cut short where a fault says so)."""
        request, reply, number, defects = (
            answered.request,
            answered.reply,
            answered.number,
            answered.defects,
        )
        path = self.server.path_model
        events = stream_events(request, reply, number, defects, path, answered.perturbation)
        if self.api == "responses" and defects.has(RESPONSES_CUT_AS_COMPLETED):
            events = [cut_said_completed(event) for event in events]
        if self.api is not None and defects.has(TRANSLATED_ARGUMENTS_ESCAPED):
            events = [arguments_escaped_event(event) for event in events]
        translator: StreamTranslator = Verbatim()
        if self.api is not None:
            translator = stream_translator(
                self.api,
                answered.native,
                path.prompt_tokens(request),
                overlap=defects.has(MESSAGES_BLOCKS_OVERLAP),
                unindexed=defects.has(RESPONSES_STREAM_UNINDEXED),
                ended=self._ended(answered),
                quirks=_quirks(defects, self.server.redact_thinking),
            )
        if answered.fault is None:
            self._stream(events, number, translator)
        else:
            self._stream_cut(events, translator, reset=answered.fault == FAULT_RESET)

    def _answer_whole(self, answered: Answered) -> None:
        """Send a reply as one JSON body, at the vendor's pace (cut where a fault says so)."""
        server = self.server
        request, number, defects, path = (
            answered.request,
            answered.number,
            answered.defects,
            server.path_model,
        )
        body = completion_body(
            request, answered.reply, number, defects, path, answered.perturbation
        )
        if server.pace.paced:
            made = body["usage"]["completion_tokens"]
            time.sleep(sum(server.pace.waits(number, made if isinstance(made, int) else 1)))
        if request.get("return_token_ids") and server.tokenizer_api == "vllm":
            assert isinstance(path, PromptPath)
            body["prompt_token_ids"] = path.prompt_ids(request)
        if self.api == "responses" and defects.has(RESPONSES_CUT_AS_COMPLETED):
            body = cut_said_ended(body)
        if self.api is not None and defects.has(TRANSLATED_ARGUMENTS_ESCAPED):
            body = arguments_escaped(body)
        if self.api is not None:
            quirks = _quirks(defects, server.redact_thinking)
            body = answer_body(
                self.api, body, answered.native, self._ended(answered), quirks=quirks
            )
        data = json.dumps(body).encode("utf-8")
        reset = len(data) // 2 if answered.fault == FAULT_RESET else None
        self._send_bytes(200, data, reset_after=reset)

    @staticmethod
    def _ended(answered: Answered) -> Ended:
        """How the reply ended, as the Messages API names it."""
        stop_as_end_turn = answered.defects.has(MESSAGES_STOP_SEQUENCE_AS_END_TURN)
        return Ended(answered.reply.stop_sequence, stop_as_end_turn)

    def _cached(self, request: dict[str, Any], defects: Defects) -> tuple[dict[str, Any], float]:
        """The request with what the prefix cache served, and the seconds its prompt takes.

        Only a long prompt is cached (:mod:`.prefix_cache`); its uncached part takes time
        before a streamed answer's first token, where a client sees it.
        """
        path = self.server.path_model
        if not isinstance(path, PromptPath):
            return request, 0.0
        ids = path.prompt_ids(request)
        cache = self.server.prefix_cache
        other = cache.collided(ids) if defects.has(PREFIX_CACHE_COLLISION) else None
        cached = cache.visit(ids)
        if cached is None:
            return request, 0.0
        marked = dict(request)
        if other is not None:
            marked[SERVED] = path.tokenizer.decode(list(other))
        if not defects.has(CACHED_TOKENS_UNREPORTED):
            marked[CACHED] = cached
        if cached and defects.has(CACHED_PREFIX_CHANGES_ANSWER):
            marked[STALE] = cached
        return marked, (len(ids) - cached) * PREFILL

    def _tokenizer_endpoint(self, route: str, raw: bytes) -> None:
        """/tokenize, /detokenize and /apply-template, in the style the vendor offers."""
        api, path = self.server.tokenizer_api, self.server.path_model
        if api == "none" or not isinstance(path, PromptPath):
            self._send_json(404, error_body(f"no route POST {route}", code="not_found"))
            return
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._send_json(400, error_body("the request body is not valid JSON"))
            return
        if not isinstance(body, dict):
            self._send_json(400, error_body("the request body must be a JSON object"))
            return
        if route == "/detokenize":
            tokens = body.get("tokens")
            if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
                self._send_json(400, error_body("tokens must be an array of integers"))
                return
            try:
                text = path.tokenizer.decode(tokens)
            except (KeyError, ValueError):
                self._send_json(400, error_body("tokens holds an id the vocabulary does not have"))
                return
            self._send_json(200, {"content": text} if api == "llamacpp" else {"prompt": text})
            return
        if route == "/apply-template" and api == "llamacpp":
            self._send_json(200, {"prompt": path.render(body)})
            return
        if route == "/tokenize" and api == "vllm" and isinstance(body.get("messages"), list):
            generation = body.get("add_generation_prompt", True)
            if self.server.defects.has(TOKENIZE_ENDPOINT_DISAGREES):
                generation = False
            ids = path.prompt_ids(body, add_generation_prompt=generation)
            self._send_json(200, {"count": len(ids), "tokens": ids, "max_model_len": 8192})
            return
        content = body.get("content", body.get("prompt"))
        if route == "/tokenize" and isinstance(content, str):
            special = body.get("parse_special", True)
            ids = (
                encode_all_special(path.tokenizer, content)
                if special
                else path.tokenizer.encode_ordinary(content)
            )
            self._send_json(200, {"tokens": ids})
            return
        self._send_json(400, error_body(f"{route}: missing or unsupported fields"))

    def _reject(self, rejection: Rejection) -> None:
        defects = self.server.defects
        if rejection.code == "invalid_image" and defects.has(VISION_INVALID_IMAGE_500):
            self._send_json(500, error_body("internal error decoding the image", "server_error"))
        elif rejection.code == "invalid_response_format" and defects.has(BAD_RESPONSE_FORMAT_500):
            self._send_json(500, error_body("internal error compiling the grammar", "server_error"))
        elif rejection.code == "missing_reasoning" and defects.has(MISSING_REASONING_500):
            self._send_json(500, error_body("internal error rendering the history", "server_error"))
        elif rejection.code == "missing_reasoning" and defects.has(MISSING_REASONING_HANG):
            self._hold()
        elif defects.has(INVALID_REQUEST_500):
            self._send_json(500, error_body("internal server error", "server_error"))
        elif defects.has(INVALID_REQUEST_HANG):
            self._hold()
        else:
            error = error_body(rejection.message, code=rejection.code)
            wrong = defects.has(ERROR_PARAM_WRONG)
            error["error"]["param"] = "prompt" if wrong else rejection.param
            self._send_json(rejection.status, error)

    def _tolerant(self) -> bool:
        """The vendor answers invalid requests as if they were valid (a defect)."""
        return self.server.defects.has(INVALID_REQUEST_200)

    def _fault(self, number: int, fault: Defect | None) -> bool:
        """Apply the faults that replace the answer; True when the request got one.

        The faults that cut an answer short (fault-reset, fault-truncated-stream) need
        the answer, and are applied while it is sent.
        """
        defects = self.server.defects
        limited = error_body("simulated rate limit", "rate_limit_error")
        if defects.has(HTTP_500_EVERY_3RD) and number % 3 == 0:
            self._send_json(500, error_body("simulated internal error", "server_error"))
        elif defects.has(HTTP_429_RETRY_AFTER) and number % 3 == 0:
            wait = defects.param(HTTP_429_RETRY_AFTER) or "1"
            self._send_json(429, limited, {"Retry-After": wait})
        elif fault == FAULT_429:
            # Retry-After 0: a client that honours it retries at once, keeping test runs fast.
            self._send_json(429, limited, {"Retry-After": "0"})
        elif fault == FAULT_500:
            self._send_json(500, error_body("simulated internal error", "server_error"))
        elif fault == FAULT_GARBAGE:
            self._send_bytes(200, GARBAGE)
        elif fault == FAULT_TIMEOUT:
            self._hold()
        else:
            return False
        return True

    def _hold(self) -> None:
        """Answer nothing until the client hangs up, the server closes or HOLD_SECONDS pass.

        Each connection has its own thread, so holding one blocks no other request.
        """
        self.close_connection = True
        deadline = time.monotonic() + HOLD_SECONDS
        while not self.server.closing.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([self.connection], [], [], min(left, HOLD_POLL))
            if readable:
                # End of file: the client gave up (a client waiting for its answer sends
                # nothing more on this connection).
                return

    def _stream_headers(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _stream(self, events: list[bytes], number: int, translator: StreamTranslator) -> None:
        """Send the stream's events, each token's after the vendor's pace lets it come.

        Each chat event goes out as `translator` makes it, when it would have gone out.
        """
        self._stream_headers()
        pace = self.server.pace
        tokens = [tokens_in(event) for event in events] if pace.paced else [0] * len(events)
        waits = iter(pace.waits(number, sum(tokens)))
        for event, count in zip(events, tokens, strict=True):
            if count:
                time.sleep(sum(next(waits) for _ in range(count)))
            self._event(translator.feed(event))
        self._event(translator.close())
        self._chunk(b"")

    def _stream_cut(
        self, events: list[bytes], translator: StreamTranslator, *, reset: bool
    ) -> None:
        """Send the first half of a stream's events (never [DONE]) and end the connection.

        Without `reset` the connection is closed in order (FIN) before the last HTTP
        chunk: the body is visibly incomplete. With `reset` half of the next event is
        sent too, then the connection is reset.
        """
        sent = len(events) // 2
        self._stream_headers()
        for event in events[:sent]:
            self._event(translator.feed(event))
        if reset:
            data = translator.feed(events[sent])
            framed = self._framed(data) if data else b""
            self._write(framed[: len(framed) // 2])
            self._reset()
        else:
            self.close_connection = True

    def _event(self, data: bytes) -> None:
        """Send `data` as one HTTP chunk (nothing for none: an empty chunk ends the body)."""
        if data:
            self._chunk(data)

    @staticmethod
    def _framed(data: bytes) -> bytes:
        """`data` as one chunk of chunked transfer encoding."""
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    def _chunk(self, data: bytes) -> None:
        self._write(self._framed(data))
        self.wfile.flush()
