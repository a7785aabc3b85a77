"""The simulated vendor's HTTP server: OpenAI-compatible chat completions over HTTP/1.1.

Standard library only (``http.server``), threaded, keep-alive; streams are
sent as SSE with chunked transfer encoding. Faults and defects from the
catalogue are applied here (transport) and in the model (behaviour).
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from .defects import Defects
from .model import MODEL_ID, Reply, count_prompt_tokens, respond

FINGERPRINT = "fp_simulated"
# Streamed tool-call arguments arrive in pieces of this many characters.
ARGUMENT_PIECE = 8


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
    ) -> None:
        super().__init__(address, Handler)
        self.defects = defects
        self.latency = latency
        self.api_key = api_key
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
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(404, error_body(f"no route POST {self.path}", code="not_found"))
            return
        try:
            request = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._send_json(400, error_body("the request body is not valid JSON"))
            return
        problem = _invalid(request)
        if problem is not None:
            status, message, code = problem
            if (
                code == "invalid_response_format"
                and "bad-response-format-500" in self.server.defects
            ):
                self._send_json(
                    500, error_body("internal error compiling the grammar", "server_error")
                )
                return
            self._send_json(status, error_body(message, code=code))
            return
        number = self.server.next_request_number()
        if self._fault(number):
            return
        if self.server.latency:
            time.sleep(self.server.latency)
        reply = respond(request, self.server.defects, number)
        usage = _usage(request, reply)
        if request.get("stream"):
            self._stream(request, reply, usage, number)
        else:
            self._send_json(200, _completion(reply, usage, number))

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

    def _stream(
        self, request: dict[str, Any], reply: Reply, usage: dict[str, int], number: int
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        base = {
            "id": f"chatcmpl-sim-{number}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": MODEL_ID,
            "system_fingerprint": FINGERPRINT,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": token}) for token in reply.tokens]
        repeat_name = "tool-name-repeated-in-stream" in self.server.defects
        calls = reply.stream_tool_calls if reply.stream_tool_calls is not None else reply.tool_calls
        for index, call in enumerate(calls):
            first = {"name": call.name, "arguments": ""}
            events.append(
                chunk(
                    {
                        "tool_calls": [
                            {"index": index, "id": call.id, "type": "function", "function": first}
                        ]
                    }
                )
            )
            for start in range(0, len(call.arguments), ARGUMENT_PIECE):
                function = {"arguments": call.arguments[start : start + ARGUMENT_PIECE]}
                if repeat_name:
                    function["name"] = call.name
                events.append(chunk({"tool_calls": [{"index": index, "function": function}]}))
        events.append(chunk({}, reply.finish_reason))
        options = request.get("stream_options") or {}
        if options.get("include_usage"):
            events.append({**base, "choices": [], "usage": usage})
        for event in events:
            self._chunk(b"data: " + json.dumps(event).encode("utf-8") + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _unresolved_refs(schema: Any, root: Any) -> list[str]:
    """Local $refs in `schema` that point nowhere."""
    missing = []
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            node = root
            for part in ref[1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    missing.append(ref)
                    break
        for key, value in schema.items():
            if key not in ("const", "enum"):
                missing += _unresolved_refs(value, root)
    elif isinstance(schema, list):
        for item in schema:
            missing += _unresolved_refs(item, root)
    return missing


def response_format_problem(response_format: Any) -> str | None:
    """Why a response_format must be rejected with a 400, or None when it is usable."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        return "response_format must be an object"
    kind = response_format.get("type")
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return f"response_format.type {kind!r} is not one of text, json_object, json_schema"
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        return "response_format.json_schema must be an object"
    name = spec.get("name")
    if not isinstance(name, str) or not _FORMAT_NAME.fullmatch(name):
        return "response_format.json_schema.name must be 1-64 letters, digits, '_' or '-'"
    schema = spec.get("schema", {})
    if not isinstance(schema, dict | bool):
        return "response_format.json_schema.schema must be a JSON Schema object"
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"response_format.json_schema.schema is not a valid JSON Schema: {exc.message}"
    missing = _unresolved_refs(schema, schema)
    if missing:
        return f"response_format.json_schema.schema has unresolvable $ref {missing[0]!r}"
    return None


def _invalid(request: Any) -> tuple[int, str, str | None] | None:
    """Why a request body must be rejected (status, message, code), or None."""
    if not isinstance(request, dict):
        return 400, "the request body must be a JSON object", None
    if request.get("model") != MODEL_ID:
        return 404, f"The model {request.get('model')!r} does not exist", "model_not_found"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return 400, "messages must be a non-empty array", None
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
        ):
            return 400, "each message needs a valid role", None
    problem = response_format_problem(request.get("response_format"))
    if problem is not None:
        return 400, problem, "invalid_response_format"
    return None


def _usage(request: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt = count_prompt_tokens(request)
    completion = reply.completion_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _completion(reply: Reply, usage: dict[str, int], number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-sim-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "system_fingerprint": FINGERPRINT,
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        ],
        "usage": usage,
    }
