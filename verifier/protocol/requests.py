"""The requests a family asks the executor to send, as data.

A family is a generator: it yields one of these, and the executor sends it through the one
endpoint client and sends the answer (a :class:`~verifier.protocol.answers.ChatResult`) back
into the generator, or throws the transport fault (an :class:`~verifier.errors.EndpointError`)
into it at the same point. The family never holds a client, so grading never reaches the
network, and a unit test drives a family with recorded answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from ..errors import EndpointError
from .answers import ChatResult

T = TypeVar("T")

# Every sampling request the verifier sends is greedy: outcomes must not depend on chance.
TEMPERATURE = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Chat:
    """``POST /chat/completions`` with `body`.

    Args:
        body: the JSON body (``stream`` and ``stream_options`` are set by the client).
        name: the request's name within its case (``stream-2``), for the transcript.
        stream: stream the answer with SSE.
        keep_persistent_5xx: a 5xx that outlived the retries is answered, not raised (for
            requests that must be refused: the server error is then the finding).
        observe: the answer is one of the case's answers (shape-checked, counted); False for
            the tokenizer ladder's helper completions.
        target: ``endpoint``, the endpoint under test, or ``reference``, the reference
            deployment the parity family compares with (``--reference-endpoint``).
        then: the requests the family yields next, in this order, whatever this one's
            answer (repeats, samples): the executor may send them with this one
            (:func:`together`); their answers still come back one by one, in order.
    """

    body: Mapping[str, Any]
    name: str
    stream: bool = False
    keep_persistent_5xx: bool = False
    observe: bool = True
    target: str = "endpoint"
    then: tuple[Chat, ...] = ()


# How a Raw request's faults are retried (see Raw).
Retry = Literal["ladder", "quick", "none"]


@dataclasses.dataclass(frozen=True, slots=True)
class Raw:
    """Bytes ``POST``ed as they are to the case's API's route (malformed-request checks).

    `stream`: the bytes ask for a stream, so an answer that comes is read as one.
    `retry`: how a fault is retried: ``ladder``, the client's retries with
    backoff; ``quick``, a server error to a request built to be bad is its own once the
    endpoint has answered steadily, and gets one immediate retry (the ladder otherwise);
    ``none``, sent once, its first answer standing (a shrinking step, judged by what one
    answer shows).
    """

    content: bytes
    content_type: str
    name: str
    observe: bool = True
    stream: bool = False
    retry: Retry = "ladder"


@dataclasses.dataclass(frozen=True, slots=True)
class Post:
    """JSON ``POST``ed to a route of the server root (``/tokenize``); any status is answered."""

    route: str
    body: Mapping[str, Any]
    name: str
    observe: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Count:
    """The case's API's token-counting route (``/messages/count_tokens``) for a chat `body`.

    The body is rendered as the API's request, as a :class:`Chat` would be, and the route
    is asked how many input tokens that request's prompt is; any status is answered.
    """

    body: Mapping[str, Any]
    name: str
    observe: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Get:
    """``GET`` a route of the server root (``/props``), parsed as JSON.

    `api`: the route is the API's own, under the base URL (``/models``).
    """

    route: str
    name: str
    observe: bool = False
    api: bool = False


def together(requests: Sequence[Chat], independent: bool = True) -> list[Chat]:
    """`requests`, to be yielded in this order, the first announcing the others.

    An exchange whose requests do not depend on each other's answers yields these instead,
    so that the executor may send them at once; one that may stop on an answer (``--budget
    auto``'s early stop) passes ``independent=False`` and gets them as they are.
    """
    if not independent or len(requests) < 2:
        return list(requests)
    first, *rest = requests
    return [dataclasses.replace(first, then=tuple(rest)), *rest]


Request = Chat | Raw | Post | Count | Get
# A family's conversation with the endpoint: yields requests, receives answers, returns T.
Exchange = Generator[Request, ChatResult, Any]


def drive(exchange: Generator[Request, ChatResult, T], send: Callable[[Request], ChatResult]) -> T:
    """Run `exchange` to its end and return its value.

    Each request goes through `send`; its answer is sent back into the exchange, or the
    transport fault `send` raised is thrown into it at the same point (a family that waits
    for a hang catches :class:`~verifier.errors.EndpointTimeout` there). A fault the exchange
    does not catch comes out of this call.
    """
    try:
        request = next(exchange)
        while True:
            try:
                answer = send(request)
            except EndpointError as fault:
                request = exchange.throw(fault)
            else:
                request = exchange.send(answer)
    except StopIteration as done:
        value: T = done.value
        return value
