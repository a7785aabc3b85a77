"""The simulated vendor's HTTP server: OpenAI-compatible chat completions over HTTP/1.1.

Standard library only (``http.server``), threaded, keep-alive; streams are
sent as SSE with chunked transfer encoding. Faults and defects from the
catalogue are applied here (transport) and in the model (behaviour).
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..reference.profiles import Profile
from ..reference.tokenizer import encode_all_special
from .answers import completion_body, stream_events
from .defects import Defects
from .model import MODEL_ID, Path, ToyPath, respond
from .prompt import PromptPath
from .validation import Policy, Rejection, request_problem


def error_body(
    message: str, kind: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    """An OpenAI-shaped error object."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class SimulatorServer(ThreadingHTTPServer):
    """The simulated vendor: its settings and the counters its faults use.

    Args:
        address: (host, port); port 0 picks a free one.
        defects: the defects and faults switched on.
        latency: seconds to wait before answering each chat request.
        api_key: when set, requests must carry ``Authorization: Bearer <api_key>``.
        profile: a reference profile: prompts are rendered and counted with its template
            and tokenizer, and the tokenizer endpoints answer.
        tokenizer_api: which tokenizer endpoints a profiled vendor offers: ``vllm``
            (/tokenize with messages, return_token_ids), ``llamacpp`` (/apply-template,
            /tokenize with content, /detokenize, /props) or ``none``.
        vision: the vendor takes images; False makes it text-only (images refused, 400).
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
    ) -> None:
        self.path_model: Path = PromptPath(profile, defects) if profile else ToyPath(defects)
        super().__init__(address, Handler)
        self.defects = defects
        self.latency = latency
        self.api_key = api_key
        self.profile = profile
        self.tokenizer_api = tokenizer_api if profile else "none"
        limits = profile.settings.get("sampling", {}) if profile else {}
        images = (profile.settings.get("images") or {}) if profile else {}
        self.policy = Policy(
            sampling={} if "sampling-limits-ignored" in defects else limits,
            vision=vision,
            max_side=int(images.get("max_side", 4096)),
        )
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

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

    def next_request_number(self) -> int:
        """Number the chat requests 1, 2, 3, ... (faults like every-3rd use it)."""
        with self._lock:
            return next(self._counter)


class Handler(BaseHTTPRequestHandler):
    """One connection; HTTP/1.1 so that clients can keep it alive."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, the second
    # waits for the client's delayed ACK (about 40 ms a request on loopback).
    disable_nagle_algorithm = True
    server: SimulatorServer
    server_version = "verifier-simulator"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay quiet: the verifier's transcript is the record."""

    # -- plumbing ------------------------------------------------------------

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _authorized(self) -> bool:
        expected = self.server.api_key
        if expected is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {expected}":
            return True
        self._send_json(
            401,
            error_body("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
        )
        return False

    # -- routes --------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        """Models list and health."""
        if self.path.rstrip("/") == "/health":
            self._send_json(200, {"status": "ok"})
            return
        if not self._authorized():
            return
        if self.path.rstrip("/") == "/props" and self.server.tokenizer_api == "llamacpp":
            assert self.server.profile is not None
            self._send_json(200, {"chat_template": self.server.profile.template.source})
            return
        if self.path.rstrip("/") == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "simulator"}
                    ],
                },
            )
            return
        self._send_json(404, error_body(f"no route GET {self.path}", code="not_found"))

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        """Chat completions."""
        raw = self._read_body()
        if not self._authorized():
            return
        route = self.path.rstrip("/")
        if route in ("/tokenize", "/detokenize", "/apply-template"):
            self._tokenizer_endpoint(route, raw)
            return
        if route != "/v1/chat/completions":
            self._send_json(404, error_body(f"no route POST {self.path}", code="not_found"))
            return
        request: Any = None
        rejection: Rejection | None
        if "json" not in (self.headers.get("Content-Type") or ""):
            rejection = Rejection(415, "Content-Type must be application/json")
        else:
            try:
                request = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                rejection = Rejection(400, "the request body is not valid JSON")
            else:
                rejection = request_problem(request, self.server.policy)
        if rejection is not None and not self._tolerant():
            self._reject(rejection)
            return
        if rejection is not None:
            request = {"model": MODEL_ID, "messages": [{"role": "user", "content": "?"}]}
        number = self.server.next_request_number()
        if self._fault(number):
            return
        if self.server.latency:
            time.sleep(self.server.latency)
        path = self.server.path_model
        reply = respond(request, self.server.defects, number, path)
        if request.get("stream"):
            self._stream(stream_events(request, reply, number, self.server.defects, path))
            return
        body = completion_body(request, reply, number, self.server.defects, path)
        if request.get("return_token_ids") and self.server.tokenizer_api == "vllm":
            assert isinstance(path, PromptPath)
            body["prompt_token_ids"] = path.prompt_ids(request)
        self._send_json(200, body)

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
            if "tokenize-endpoint-disagrees" in self.server.defects:
                generation = False
            ids = path.prompt_ids(body, add_generation_prompt=generation)
            self._send_json(200, {"count": len(ids), "tokens": ids, "max_model_len": 8192})
            return
        if route == "/tokenize" and isinstance(body.get("content", body.get("prompt")), str):
            text = body.get("content", body.get("prompt"))
            special = body.get("parse_special", True)
            ids = (
                encode_all_special(path.tokenizer, text)
                if special
                else path.tokenizer.encode_ordinary(text)
            )
            self._send_json(200, {"tokens": ids})
            return
        self._send_json(400, error_body(f"{route}: missing or unsupported fields"))

    def _reject(self, rejection: Rejection) -> None:
        defects = self.server.defects
        if rejection.code == "invalid_image" and "vision-invalid-image-500" in defects:
            self._send_json(500, error_body("internal error decoding the image", "server_error"))
        elif rejection.code == "invalid_response_format" and "bad-response-format-500" in defects:
            self._send_json(500, error_body("internal error compiling the grammar", "server_error"))
        elif "invalid-request-500" in defects:
            self._send_json(500, error_body("internal server error", "server_error"))
        else:
            error = error_body(rejection.message, code=rejection.code)
            error["error"]["param"] = rejection.param
            self._send_json(rejection.status, error)

    def _tolerant(self) -> bool:
        """The vendor answers invalid requests as if they were valid (a defect)."""
        return "invalid-request-200" in self.server.defects

    def _fault(self, number: int) -> bool:
        """Apply transport faults; True when the request was answered by one."""
        defects = self.server.defects
        if "http-500-every-3rd" in defects and number % 3 == 0:
            self._send_json(500, error_body("simulated internal error", "server_error"))
            return True
        if "http-429-retry-after" in defects and number % 3 == 0:
            wait = defects.param("http-429-retry-after") or "1"
            self._send_json(
                429, error_body("simulated rate limit", "rate_limit_error"), {"Retry-After": wait}
            )
            return True
        return False

    def _stream(self, events: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:
            self._chunk(event)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
