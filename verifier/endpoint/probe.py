"""Capability discovery before collection: is the endpoint there, which model, what it serves.

A probe that cannot proceed raises :class:`~verifier.errors.ConfigError` or an
:class:`~verifier.errors.EndpointError` with one line that says what to fix,
so that a wrong URL or key is one clear error, not a thousand failed tests.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import ConfigError, EndpointError
from ..protocol.answers import ChatResult
from ..protocol.apis import API_NAMES, ROUTES, TITLES, UNSERVED
from ..protocol.labels import PROBE, Label
from ..protocol.logprobs import LogprobsSupport, ReferenceEndpoint
from ..protocol.requests import drive
from ..protocol.tokenize import TokenizerEndpoints, probe_tokenizer_endpoints
from .client import EndpointClient
from .probe_words import PUBLISHED, ProbeWords
from .redaction import redact_url

# Response headers worth recording because they identify the server software or deployment.
IDENTIFYING_HEADERS = (
    "server",
    "x-powered-by",
    "openai-version",
    "openai-model",
    "x-model",
    "x-served-by",
    "via",
)
# A header value that looks like a credential or session token is never recorded.
_SECRET_LOOKING = re.compile(r"\b(sk|pk|key|tok)[-_][A-Za-z0-9_-]{8,}|[A-Za-z0-9+/_=-]{32,}")


def identifying_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers that identify the server, without anything that looks like a secret."""
    return {
        name: value
        for name, value in headers.items()
        if name in IDENTIFYING_HEADERS and not _SECRET_LOOKING.search(value)
    }


@dataclasses.dataclass(frozen=True, slots=True)
class Capabilities:
    """What the probe learned; recorded in the scorecard and sent to xdist workers.

    Args:
        model: the model the run will use.
        models: the ids listed by ``GET /models`` (empty when it is not served).
        served_model: the ``model`` field of the probe's chat answer.
        system_fingerprint: the probe answer's ``system_fingerprint``.
        server: identifying response headers.
        tokenizer_endpoints: which tokenizer endpoints answer (see protocol/tokenize.py);
            None when no family that needs them was selected.
        vision: the endpoint takes images (True), refuses them with a 4xx (False), or
            answered the probe image otherwise, or was not asked (None).
        logprobs: the most ``top_logprobs`` it gives, or why it gives none; None when not
            asked.
        reference: the reference deployment's model and logprobs (``--reference-endpoint``),
            or None.
        apis: the APIs the run verifies: ``--api``'s, or every one the endpoint answered
            a minimal request on (chat always: the chat probe must be answered).
        formats: the APIs other than chat that serve no structured output, each with why
            (:func:`probe_format`); asked when a family needs it.
    """

    model: str
    models: tuple[str, ...] = ()
    served_model: str | None = None
    system_fingerprint: str | None = None
    server: dict[str, str] = dataclasses.field(default_factory=dict)
    tokenizer_endpoints: TokenizerEndpoints | None = None
    vision: bool | None = None
    logprobs: LogprobsSupport | None = None
    reference: ReferenceEndpoint | None = None
    apis: tuple[str, ...] = ("chat",)
    formats: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON data."""
        data = dataclasses.asdict(self)
        data["models"] = list(self.models)
        data["apis"] = list(self.apis)
        found = self.tokenizer_endpoints
        data["tokenizer_endpoints"] = None if found is None else found.to_dict()
        data["logprobs"] = None if self.logprobs is None else self.logprobs.to_dict()
        data["reference"] = None if self.reference is None else self.reference.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Capabilities:
        """The inverse of :meth:`to_dict`."""
        found = data.get("tokenizer_endpoints")
        logprobs, reference = data.get("logprobs"), data.get("reference")
        return cls(
            model=data["model"],
            models=tuple(data.get("models", ())),
            served_model=data.get("served_model"),
            system_fingerprint=data.get("system_fingerprint"),
            server=dict(data.get("server", {})),
            tokenizer_endpoints=(None if found is None else TokenizerEndpoints.from_dict(found)),
            vision=data.get("vision"),
            logprobs=None if logprobs is None else LogprobsSupport.from_dict(logprobs),
            reference=None if reference is None else ReferenceEndpoint.from_dict(reference),
            apis=tuple(data.get("apis", ("chat",))),
            formats=dict(data.get("formats", {})),
        )


def list_models(client: EndpointClient) -> tuple[str, ...] | None:
    """The model ids from ``GET /models``, or None when the endpoint does not serve the list."""
    result = client.get("/models", label=str(Label(PROBE, "models")))
    refuse_redirect(client, result, "/models")
    if result.status in (404, 405):
        return None
    body = result.body
    if not result.ok or not isinstance(body, dict) or not isinstance(body.get("data"), list):
        raise ConfigError(
            f"{client.display_url}/models answered HTTP {result.status} with an unexpected body: "
            f"is this an OpenAI-compatible API base URL?"
        )
    return tuple(
        str(item["id"]) for item in body["data"] if isinstance(item, dict) and "id" in item
    )


def tokenizer_endpoints(
    client: EndpointClient, model: str, words: ProbeWords = PUBLISHED
) -> TokenizerEndpoints:
    """Which tokenizer routes the server answers (a few small requests, labelled ``probe/``)."""
    found: TokenizerEndpoints = drive(
        probe_tokenizer_endpoints(model, words.greeting),
        lambda request: client.send(request, str(Label(PROBE, request.name))),
    )
    return found


def refuse_redirect(client: EndpointClient, result: ChatResult, path: str) -> None:
    """Stop the run when the endpoint redirects: the verifier follows no redirect.

    Following one could send the key to another host, and would verify a server other
    than the one named; the user should name the final URL instead.

    Raises:
        ConfigError: naming where the endpoint points to.
    """
    if 300 <= result.status < 400:
        target = redact_url(result.headers.get("location", "(no Location header)"))
        raise ConfigError(
            f"{client.display_url}{path} redirects to {target} (HTTP {result.status}); the "
            f"verifier follows no redirect: give the final URL as --endpoint"
        )


def choose_model(requested: str | None, models: tuple[str, ...] | None, where: str) -> str:
    """The model to test: the one asked for, or the only one listed.

    Raises:
        ConfigError: the model is not listed, or none was asked for and there
            is not exactly one to choose.
    """
    if requested is not None:
        if models is not None and models and requested not in models:
            raise ConfigError(
                f"model {requested!r} is not served by {where}; it serves: {', '.join(models)}"
            )
        return requested
    if models is None:
        raise ConfigError(f"{where} does not list its models (/models): name one with --model")
    if not models:
        raise ConfigError(f"{where}/models lists no model: name one with --model")
    if len(models) > 1:
        raise ConfigError(
            f"{where} serves several models ({', '.join(models)}): choose one with --model"
        )
    return models[0]


def probe(
    client: EndpointClient,
    requested_model: str | None,
    *,
    vision: bool = False,
    tokenizer: bool = False,
    logprobs: bool = False,
    apis: tuple[str, ...] | None = ("chat",),
    formats: bool = False,
    words: ProbeWords = PUBLISHED,
) -> Capabilities:
    """Find the model, check that one minimal chat request is answered, and learn what it offers.

    With `vision`, whether the endpoint takes images; with `tokenizer`, which tokenizer
    endpoints it serves; with `logprobs`, how many alternatives it lists; of `apis` (None:
    every API), which it serves, and with `formats`, which of those serve structured output.
    The probes say `words` (drawn from the secret under ``--rotate``).
    Those probes do not depend on the chat probe's answer, so they go out together and cost
    one round trip; the chat probe's error, when there is one, is the one raised (it is about
    the endpoint as a whole).

    Raises:
        ConfigError: the model cannot be chosen or is not served, or an API named in `apis`
            is not served.
        EndpointError: the endpoint is unreachable, rejects the key, or fails.
    """
    models = list_models(client)
    model = choose_model(requested_model, models, client.display_url)
    others = [a for a in (API_NAMES if apis is None else apis) if a != "chat"]
    with ThreadPoolExecutor(4 + len(others), thread_name_prefix="verifier-probe") as pool:
        chat = pool.submit(probe_chat, client, model, models or (), words)
        served = {api: pool.submit(probe_api, client, model, api, words) for api in others}
        shaped = {
            api: pool.submit(probe_format, client, model, api, words) for api in others if formats
        }
        images = pool.submit(probe_vision, client, model, words) if vision else None
        endpoints = pool.submit(tokenizer_endpoints, client, model, words) if tokenizer else None
        alternatives = pool.submit(probe_logprobs, client, model, words) if logprobs else None
        capabilities = chat.result()
        if alternatives is not None:
            capabilities = dataclasses.replace(capabilities, logprobs=alternatives.result())
        if images is not None:
            capabilities = dataclasses.replace(capabilities, vision=images.result())
        if endpoints is not None:
            capabilities = dataclasses.replace(capabilities, tokenizer_endpoints=endpoints.result())
        statuses = {api: answer.result() for api, answer in served.items()}
    found = {api for api, status in statuses.items() if status not in UNSERVED}
    if apis is not None and (missing := [a for a in others if a not in found]):
        raise ConfigError(
            f"{client.display_url} does not serve the {TITLES[missing[0]]} API "
            f"(POST {ROUTES[missing[0]]} answered {statuses[missing[0]]}): leave "
            f"{missing[0]} out of --api"
        )
    chosen = API_NAMES if apis is None else apis
    run_apis = tuple(a for a in chosen if a == "chat" or a in found)
    unserved = {a: why for a, answer in shaped.items() if a in found and (why := answer.result())}
    return dataclasses.replace(capabilities, apis=run_apis, formats=unserved)


# The probe of an API's structured output: a schema only JSON can meet, asked of a prompt whose
# unconstrained answer is prose.
def format_schema(field: str) -> dict[str, Any]:
    """A schema only JSON can meet: one string property, `field`."""
    return {
        "type": "object",
        "properties": {field: {"type": "string"}},
        "required": [field],
        "additionalProperties": False,
    }


# Where each API takes the schema, for messages.
FORMAT_FIELDS = {"messages": "output_config.format", "responses": "text.format"}


def probe_format(
    client: EndpointClient, model: str, api: str, words: ProbeWords = PUBLISHED
) -> str | None:
    """Why `api` serves no structured output; None when it does, or may.

    The request asks in prose ("in one short sentence") under a JSON schema. Only a refusal
    (4xx) or an answer in prose says the API serves none: a server error, an answer that
    cannot be read, or JSON that breaks the schema is served structured output done wrong,
    which the cases themselves then grade.
    """
    request = {
        "model": model,
        "messages": [{"role": "user", "content": words.format_question}],
        "max_tokens": 32,
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": words.field,
                "schema": format_schema(words.field),
                "strict": True,
            },
        },
    }
    result = client.chat(
        request, label=str(Label(PROBE, f"{api}-format")), keep_persistent_5xx=True, api=api
    )
    field = FORMAT_FIELDS[api]
    if 400 <= result.status < 500:
        message = (result.error_object or {}).get("message")
        return f"a request with {field} was refused with HTTP {result.status}: {message}"
    text = result.choice.content if result.ok and result.choice is not None else None
    if text is None:
        return None
    try:
        json.loads(text)
    except ValueError:
        return f"a request with {field} was answered with free text: {text[:80]!r}"
    return None


def probe_api(client: EndpointClient, model: str, api: str, words: ProbeWords = PUBLISHED) -> int:
    """The status of the chat probe's request sent through `api`: :data:`UNSERVED`, not served.

    Any other answer (a refusal too) means the route is there: the cases show what it does.
    """
    request = {
        "model": model,
        "messages": [{"role": "user", "content": words.greeting}],
        "max_tokens": words.max_tokens,
    }
    result = client.chat(request, label=str(Label(PROBE, api)), keep_persistent_5xx=True, api=api)
    refuse_redirect(client, result, ROUTES[api])
    return result.status


def probe_chat(
    client: EndpointClient, model: str, models: tuple[str, ...], words: ProbeWords = PUBLISHED
) -> Capabilities:
    """Check that one minimal chat request to `model` is answered; what its answer tells.

    Raises:
        ConfigError: the endpoint redirects, or does not serve the model.
        EndpointError: the endpoint rejects the key, or fails.
    """
    request = {
        "model": model,
        "messages": [{"role": "user", "content": words.greeting}],
        # No sampling fields: a model whose contract pins them refuses other values.
        "max_tokens": words.max_tokens,
    }
    result = client.chat(request, label=str(Label(PROBE, "chat")))
    refuse_redirect(client, result, "/chat/completions")
    if result.status == 404:
        raise ConfigError(f"{client.display_url} does not serve model {model!r} (404)")
    if not result.ok:
        error = result.error_object or {}
        detail = error.get("message") if isinstance(error.get("message"), str) else result.body
        raise EndpointError(
            f"{client.display_url} rejected a minimal chat request with HTTP {result.status}: "
            f"{str(detail)[:200]}"
        )
    return Capabilities(
        model=model,
        models=models,
        served_model=result.model,
        system_fingerprint=result.system_fingerprint,
        server=identifying_headers(result.headers),
    )


def probe_vision(client: EndpointClient, model: str, words: ProbeWords = PUBLISHED) -> bool | None:
    """Does the endpoint take images? One small picture: 200 yes, 4xx no, anything else unknown."""
    from ..reference.images import image_part

    part = image_part({"kind": "solid", "color": words.colour, "size": [words.side, words.side]})
    content = [part, {"type": "text", "text": words.question}]
    request = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": words.max_tokens,
    }
    result = client.chat(request, label=str(Label(PROBE, "vision")), keep_persistent_5xx=True)
    if result.ok:
        return True
    return False if 400 <= result.status < 500 else None


# top_logprobs values tried, most first: OpenAI's API lists at most 20.
TOP_LOGPROBS = (20, 10, 5, 1)


def probe_logprobs(
    client: EndpointClient, model: str, words: ProbeWords = PUBLISHED
) -> LogprobsSupport:
    """The most ``top_logprobs`` the endpoint lists, or why it lists none.

    One greedy token with ``logprobs``; a 4xx means the value is refused, and the next smaller
    is tried. An answer without logprobs means the endpoint ignores the field.
    """
    why = "no answer"
    for top in TOP_LOGPROBS:
        request = {
            "model": model,
            "messages": [{"role": "user", "content": words.greeting}],
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": top,
        }
        result = client.chat(
            request, label=str(Label(PROBE, f"logprobs-{top}")), keep_persistent_5xx=True
        )
        if not result.ok:
            error = result.error_object or {}
            why = f"top_logprobs={top} refused with HTTP {result.status}: {error.get('message')}"
            if 400 <= result.status < 500:
                continue
            break
        entries = result.choice.logprobs if result.choice else None
        if not entries:
            return LogprobsSupport(None, "the answer to logprobs: true has no logprobs")
        listed = entries[0].get("top_logprobs") if isinstance(entries[0], dict) else None
        if not listed:
            return LogprobsSupport(None, f"top_logprobs={top} answered with no alternatives")
        return LogprobsSupport(min(top, len(listed)))
    return LogprobsSupport(None, why[:300])


def probe_reference(client: EndpointClient, requested_model: str | None) -> ReferenceEndpoint:
    """The reference deployment's model and how many alternatives it lists.

    Raises:
        ConfigError: its model cannot be chosen (named in terms of --reference-model).
        EndpointError: it is unreachable or rejects its key.
    """
    models = list_models(client)
    try:
        model = choose_model(requested_model, models, client.display_url)
    except ConfigError as exc:
        raise ConfigError(
            f"--reference-endpoint: {str(exc).replace('--model', '--reference-model')}"
        ) from None
    return ReferenceEndpoint(model, probe_logprobs(client, model))
