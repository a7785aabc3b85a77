"""Model profiles: the chat template and tokenizer of the model under test, and its policies.

A profile is a folder from the model release. What is found in it:

- the chat template: ``chat_template.jinja``, else the ``chat_template`` of
  ``tokenizer_config.json``;
- the tokenizer: ``tokenizer.json`` (Hugging Face), else a tiktoken BPE file
  (``tiktoken.model``) with its pre-tokenisation regex (from ``tokenizer_spec.json``,
  ``verifier-profile.json`` or the built-in profile named on the command line) and
  the special tokens of ``tokenizer_config.json``;
- optionally ``verifier-profile.json`` (validated against ``schemas/profile.schema.json``):
  file names, the regex, the served model ids that select it, and policies such as the
  prompt-token tolerance.

``--profile NAME`` names a built-in profile (a folder shipped in ``builtin/``);
``--profile PATH`` a folder; ``--profile NAME:PATH`` a folder on top of the built-in
profile NAME: the folder's files and settings first, the built-in's for what the folder
lacks (``kimi-k2:PATH`` gives a folder with only ``tiktoken.model`` Kimi's regex).
``--profile gguf:PATH`` reads the template and tokenizer from a GGUF file's metadata
(:mod:`.gguf`); such a profile states no policies. ``--profile hf:ORG/NAME[@REVISION]`` reads
them from a snapshot of the model's hub repository (:mod:`.hub`), under the contract of the
built-in profile for that model when there is one; a built-in profile that ships no files
names its repository (``hub``) and is read the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jsonschema import exceptions as jsonschema_exceptions

from .. import resources
from ..errors import ConfigError
from . import gguf, hub
from .dialect import Dialect, merged
from .template import ChatTemplate, Rendered, TemplateError
from .tokenizer_backends import (
    KIMI_PAT_STR,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    encode_prompt,
)

PROFILE_FILE = "verifier-profile.json"
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# The built-in profiles: one folder each, named as the profile.
BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
# What --profile says to choose no profile, not even one the served model id would select.
NO_PROFILE = "none"
# --profile gguf:PATH: a GGUF file's metadata.
GGUF_PREFIX = "gguf:"
# Built-in defaults by profile name; a folder's verifier-profile.json overrides them.
# Kimi's tokenizer is remote code in its repositories (tokenization_kimi.py); this is its
# documented equivalent: the release's tiktoken.model with the regex and reserved ids stated there.
_KIMI_TOKENIZER = {"tokenizer": {"pat_str": KIMI_PAT_STR, "reserved_special_tokens": 256}}
BUILTIN: dict[str, dict[str, Any]] = {
    name: _KIMI_TOKENIZER for name in ("kimi-k2", "kimi-k2-thinking", "kimi-k2.5", "kimi-k3")
}
# Built-ins that ship their own chat template and read their tokenizer from another built-in's
# folder: the Kimi K2 family's tokenizer is one file (tiktoken.model, sha256 b6c497a7...), the
# same in every K2 release and in K3, shipped once, in kimi-k2/.
SHARES_TOKENIZER = {"kimi-k2-thinking": "kimi-k2"}
# A contract's facts are named by dotted path ("reasoning.history", "sampling.top_p.fixed").
# A fact is a value that is not an object, at any depth; an object is walked into, except these,
# each one fact as a whole: a request fragment, whose keys are the lab's request fields (not the
# profile's) and which a source states whole ("send {"thinking": {"type": "enabled"}}").
WHOLE_FACTS = frozenset({"thinking.on", "thinking.off"})
# Keys about the file itself, or the verifier's own choice (which hub revision to read; the
# scorecard records the commit it resolved to): no source states them.
NOT_FACTS = frozenset({"description", "version", "sources", "cites", "hub.revision"})


@dataclasses.dataclass(frozen=True, slots=True)
class Policies:
    """What the model's release states of how it must be served (``verifier-profile.json``).

    Args:
        thinking: the request fields that turn reasoning on and off (``{"on": {...},
            "off": {...}}``), or None when the release states no thinking switch.
        sampling: limits and pins per sampling field (``min``, ``max``, ``fixed``,
            ``values``, ``off_policy``), or None.
        images: the image-token rule (``rule``, ``tile``...) and ``max_side``, or None.
        seed_supported: False when the server documents no seed support; None if unstated.
        gate: the gate's thresholds for this model (as in a thresholds TOML), or None.
        tool_call_id: the documented format of tool-call ids (``pattern``,
            ``names_function``), or None.
        features: model-specific request features the lab's API has (``partial_prefill``,
            ``dynamic_tools``), or None.
        reasoning: where reasoning comes back, its raw form, effort and history rules
            (see :class:`~verifier.reference.dialect.Dialect`), or None.
        generation_defaults: the sampling values of the model's ``generation_config.json``
            that a server applies when the client omits them (``temperature``, ``top_k``...),
            or None.
    """

    thinking: Mapping[str, Mapping[str, Any]] | None = None
    sampling: Mapping[str, Mapping[str, Any]] | None = None
    images: Mapping[str, Any] | None = None
    seed_supported: bool | None = None
    gate: Mapping[str, Any] | None = None
    tool_call_id: Mapping[str, Any] | None = None
    features: Mapping[str, bool] | None = None
    reasoning: Mapping[str, Any] | None = None
    generation_defaults: Mapping[str, float] | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Policies:
        """The policies among a profile's merged settings."""
        return cls(**{f.name: settings.get(f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class Profile:
    """A loaded profile: render and tokenize exactly as the model expects.

    Args:
        name: the profile's name (the NAME of NAME:PATH, else the folder's name).
        root: the folder.
        template: the chat template.
        tokenizer: the tokenizer.
        settings: the merged verifier-profile.json settings.
        builtin: the profile's contract ships with the package (``--profile NAME``).
        bos_id: the id every prompt begins with, once (a GGUF file's ``add_bos_token``);
            None when the template alone decides.
        snapshot: the hub commit the files were read from, or None for local files.
    """

    name: str
    root: Path
    template: ChatTemplate
    tokenizer: Tokenizer
    settings: Mapping[str, Any]
    builtin: bool = False
    bos_id: int | None = None
    snapshot: hub.Snapshot | None = None

    @property
    def template_digest(self) -> str:
        """sha256 of the template text."""
        return hashlib.sha256(self.template.source.encode()).hexdigest()

    @property
    def policies(self) -> Policies:
        """The serving policies the release states."""
        return Policies.from_settings(self.settings)

    @property
    def dialect(self) -> Dialect | None:
        """The model's reasoning dialect, or None when the contract states none."""
        policies = self.policies
        return Dialect.of(policies.thinking, policies.reasoning)

    def with_template_variables(self, variables: Mapping[str, Any]) -> Profile:
        """The profile rendering with `variables` as well (a request's chat_template_kwargs)."""
        if not variables:
            return self
        return dataclasses.replace(self, template=self.template.with_variables(variables))

    @property
    def temperature_pin(self) -> tuple[float, ...] | None:
        """The temperatures the model's contract allows when it pins them, else None."""
        return pinned_values((self.policies.sampling or {}).get("temperature") or {})

    @property
    def sampled(self) -> bool:
        """The contract pins temperature above 0: answers are samples, never greedy."""
        pin = self.temperature_pin
        return pin is not None and 0 not in pin

    @property
    def window(self) -> int | None:
        """The context window the release states, in tokens, or None when it states none."""
        tokens = (self.settings.get("limits") or {}).get("context_tokens")
        return tokens if isinstance(tokens, int) else None

    @property
    def rope_scaling(self) -> Mapping[str, Any] | None:
        """How the release stretches RoPE past its original training length, or None."""
        return self.settings.get("rope_scaling")

    @property
    def prompt_tokens_tolerance(self) -> int:
        """How far usage.prompt_tokens may stray from the local count (default 0)."""
        return int(self.settings.get("prompt_tokens_tolerance", 0))

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> Rendered:
        """The prompt text of a conversation, with where user text spelling special tokens is."""
        return self.template.render(
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            protect=tuple(self.tokenizer.special_tokens),
        )

    def render_continued(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Rendered | None:
        """The conversation with its final assistant message left open to be continued.

        As Hugging Face's ``continue_final_message`` builds it: the whole conversation
        rendered, cut after the final message's text. None when the last message is not an
        assistant message with text, or the template does not write that text.
        """
        final = messages[-1] if messages else {}
        content = final.get("content")
        if final.get("role") != "assistant" or not isinstance(content, str) or not content.strip():
            return None
        whole = self.render(messages, tools, add_generation_prompt=False)
        if content.strip() not in whole.text:
            return None
        end = whole.text.rindex(content.strip()) + len(content.strip())
        return Rendered(whole.text[:end], tuple(s for s in whole.spans if s[1] <= end))

    def encode(self, rendered: Rendered) -> list[int]:
        """Ids of a rendered prompt, with user-written special-token text kept ordinary."""
        ids = encode_prompt(self.tokenizer, rendered.text, rendered.spans)
        if self.bos_id is not None and ids[:1] != [self.bos_id]:
            ids.insert(0, self.bos_id)
        return ids

    def prompt_ids(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Render and encode a conversation."""
        rendered = self.render(messages, tools, add_generation_prompt=add_generation_prompt)
        return self.encode(rendered)

    def describe(self) -> dict[str, Any]:
        """What the scorecard records about the profile."""
        described: dict[str, Any] = {
            "name": self.name,
            "template_sha256": self.template_digest,
            "tokenizer": self.tokenizer.name,
            "tokenizer_sha256": self.tokenizer.digest,
            "builtin": self.builtin,
        }
        if "version" in self.settings:
            described["contract_version"] = self.settings["version"]
        if self.snapshot is not None:
            described["hub"] = self.snapshot.describe()
        return described


def builtin_names() -> tuple[str, ...]:
    """The names of the built-in profiles, sorted."""
    return tuple(sorted(p.name for p in BUILTIN_DIR.iterdir() if (p / PROFILE_FILE).is_file()))


def builtin_contract(name: str) -> dict[str, Any]:
    """The built-in profile `name`'s own settings (its contract), as its file states them."""
    contract: dict[str, Any] = _read_json(BUILTIN_DIR / name / PROFILE_FILE)
    return contract


def facts(contract: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every fact a contract states, by dotted path (see :data:`WHOLE_FACTS`), with its value."""
    found: dict[str, Any] = {}
    for key, value in contract.items():
        path = f"{prefix}{key}"
        if path in NOT_FACTS:
            continue
        if isinstance(value, Mapping) and path not in WHOLE_FACTS:
            found.update(facts(value, f"{path}."))
        else:
            found[path] = value
    return found


def citation_errors(contract: Mapping[str, Any]) -> list[str]:
    """What is wrong with a contract's citations, one line each (none when every fact is cited).

    Every fact names the sources that state it in ``cites``, by its own dotted path (a source
    cited for a whole object would not say which of its facts it states); every cite names a
    fact and listed sources; every listed source is cited.
    """
    stated = facts(contract)
    cites: Mapping[str, Sequence[str]] = contract.get("cites") or {}
    sources: Mapping[str, Any] = contract.get("sources") or {}
    errors = [f"{path}: no source cited" for path in stated if not cites.get(path)]
    errors += [
        f"cites {path}: the contract states no such fact" for path in cites if path not in stated
    ]
    errors += [
        f"cites {path}: {source!r} is not in sources"
        for path, ids in cites.items()
        for source in ids
        if source not in sources
    ]
    cited = {source for ids in cites.values() for source in ids}
    errors += [f"sources {source}: no fact cites it" for source in sources if source not in cited]
    return errors


def ships_files(name: str) -> bool:
    """The built-in profile `name` ships its model files (else they come from its hub repo)."""
    return _hub_source(BUILTIN_DIR / name) is None


def pinned_values(limit: Mapping[str, Any]) -> tuple[float, ...] | None:
    """The values a sampling setting is pinned to (``fixed`` or ``values``), or None."""
    values = [limit["fixed"]] if "fixed" in limit else limit.get("values")
    return tuple(values) if values else None


def parse_spec(spec: str) -> tuple[str, Path, Path | None]:
    """``NAME``, ``PATH`` or ``NAME:PATH`` -> (name, folder, built-in folder beneath it).

    A bare built-in name is the built-in profile (write ``./NAME`` for a folder of that
    name); a folder is taken as it is; ``NAME:PATH`` puts the folder on top of the
    built-in profile NAME when there is one.

    Raises:
        ConfigError: no such built-in profile or folder.
    """
    builtins = builtin_names()
    if spec in builtins:
        return spec, BUILTIN_DIR / spec, None
    path = Path(spec).expanduser()
    if path.is_dir():
        return path.resolve().name, path.resolve(), None
    name, sep, rest = spec.partition(":")
    if sep and _NAME.match(name):
        folder = Path(rest).expanduser()
        if folder.is_dir():
            base = BUILTIN_DIR / name if name in builtins else None
            return name, folder.resolve(), base
        raise ConfigError(
            f"--profile: {rest!r} is not a folder (expected NAME:PATH to a model folder)"
        )
    if _NAME.match(spec):
        close = difflib.get_close_matches(spec, builtins, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"--profile: {spec!r} is neither a built-in profile{hint} nor a folder; "
            f"built in: {', '.join(builtins)}; or give PATH or NAME:PATH"
        )
    raise ConfigError(f"--profile: {spec!r} is not a folder (expected PATH or NAME:PATH)")


def _first(roots: Sequence[Path], name: str) -> Path | None:
    """`name` in the first of `roots` that has it."""
    return next((root / name for root in roots if (root / name).is_file()), None)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--profile: cannot read {path}: {exc}") from None


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        content: str = value["content"]
        return content
    return None


def _template_source(roots: Sequence[Path], settings: Mapping[str, Any]) -> tuple[str, str]:
    """The chat template's text and where it came from, from the first root that has one."""
    for root in roots:
        candidate = root / (settings.get("template") or "chat_template.jinja")
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8"), str(candidate)
        # A processor's template (vision models) comes as chat_template.json.
        config = root / "chat_template.json"
        if not config.is_file():
            config = root / "tokenizer_config.json"
        template = _read_json(config).get("chat_template") if config.is_file() else None
        if isinstance(template, list):
            template = next(
                (t.get("template") for t in template if t.get("name") == "default"), None
            )
        if isinstance(template, str):
            return template, f"{config} (chat_template)"
    raise ConfigError(
        f"--profile: {roots[0]} has no chat template (chat_template.jinja or tokenizer_config.json)"
    )


def _tokenizer_file(roots: Sequence[Path], named: str | None) -> Path | None:
    """The tokenizer file of the first root that has one (the named file, else a usual name)."""
    for root in roots:
        for candidate in (named, "tokenizer.json", "tiktoken.model"):
            if candidate and (root / candidate).is_file():
                return root / candidate
    return None


def _tokenizer(
    roots: Sequence[Path], settings: Mapping[str, Any], config: Mapping[str, Any]
) -> Tokenizer:
    spec = settings.get("tokenizer", {})
    path = _tokenizer_file(roots, spec.get("file"))
    if path is None:
        raise ConfigError(
            f"--profile: {roots[0]} has no tokenizer (tokenizer.json or tiktoken.model)"
        )
    if path.suffix == ".json":
        return HFTokenizer(path)
    pat_str = spec.get("pat_str")
    if not pat_str:
        raise ConfigError(
            f"--profile: {path.name} needs its pre-tokenisation regex: add tokenizer_spec.json or "
            f"{PROFILE_FILE} with tokenizer.pat_str, or use a built-in NAME ({', '.join(BUILTIN)})"
        )
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(path))
    base = len(ranks)
    reserved = int(spec.get("reserved_special_tokens", 0))
    named = {
        int(k): v["content"]
        for k, v in (config.get("added_tokens_decoder") or {}).items()
        if isinstance(v, Mapping) and isinstance(v.get("content"), str)
    }
    specials = {named.get(i, f"<|reserved_token_{i}|>"): i for i in range(base, base + reserved)}
    specials.update({text: i for i, text in named.items() if i >= base})
    return TiktokenTokenizer(path, pat_str, specials, ranks)


def _settings(roots: Sequence[Path], name: str) -> dict[str, Any]:
    """The built-in defaults, then each root's tokenizer_spec.json and settings, deepest first.

    A folder over a built-in profile inherits its contract, served model ids included: the
    folder holds the same model's files (a thinking template, a vision projector's rule).
    """
    settings: dict[str, Any] = dict(BUILTIN.get(name, {}))
    for root in reversed(roots):
        if (root / "config.json").is_file():
            settings = merged(settings, _release_window(_read_json(root / "config.json")))
        spec_file = root / "tokenizer_spec.json"
        if spec_file.is_file():
            data = _read_json(spec_file)
            settings = merged(
                settings,
                {
                    "tokenizer": {
                        "file": data.get("vocab_file"),
                        "pat_str": data.get("pat_str"),
                        "reserved_special_tokens": data.get("num_reserved_special_tokens", 0),
                    }
                },
            )
        if (root / PROFILE_FILE).is_file():
            data = _read_json(root / PROFILE_FILE)
            error = jsonschema_exceptions.best_match(
                resources.validator("profile").iter_errors(data)
            )
            if error is not None:
                raise ConfigError(
                    f"--profile: {root / PROFILE_FILE}: {error.json_path}: {error.message}"
                )
            settings = merged(settings, data)
    return settings


def _release_window(config: Any) -> dict[str, Any]:
    """The window a model's ``config.json`` states, as profile settings (empty: none).

    ``max_position_embeddings`` is the context length the model was built for; ``rope_scaling``
    (YaRN and its kin) says how far past its original training length that reaches.
    """
    if not isinstance(config, Mapping):
        return {}
    found: dict[str, Any] = {}
    tokens = config.get("max_position_embeddings")
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
        found["limits"] = {"context_tokens": tokens}
    scaling = config.get("rope_scaling")
    if isinstance(scaling, Mapping) and isinstance(scaling.get("factor"), int | float):
        found["rope_scaling"] = rope_scaling(
            scaling.get("type") or scaling.get("rope_type"),
            scaling["factor"],
            scaling.get("original_max_position_embeddings"),
        )
    return found


def rope_scaling(kind: Any, factor: Any, original: Any) -> dict[str, Any]:
    """A RoPE-scaling statement as the profile schema's ``rope_scaling`` holds it."""
    statement: dict[str, Any] = {"type": str(kind or "unknown"), "factor": float(factor)}
    if isinstance(original, int) and not isinstance(original, bool) and original > 0:
        statement["original_context_tokens"] = original
    return statement


def load_profile(spec: str) -> Profile:
    """Load the profile named by ``--profile``.

    Raises:
        ConfigError: the folder, its files or its settings do not load, or the template
            does not render a one-message conversation.
    """
    if spec.startswith(GGUF_PREFIX):
        return load_gguf_profile(Path(spec.removeprefix(GGUF_PREFIX)).expanduser())
    name, roots, snapshot, contract = _locate(spec)
    root = roots[0]
    settings = _settings(roots, name)
    if snapshot is not None:
        _refuse_remote_code(spec, snapshot, settings)
    template, tokenizer, origin = _load_files(roots, settings)
    profile = Profile(
        name,
        root,
        template,
        tokenizer,
        settings,
        builtin=root.parent == BUILTIN_DIR or contract is not None,
        snapshot=snapshot,
    )
    try:
        profile.prompt_ids([{"role": "user", "content": "Hello"}])
    except TemplateError as exc:
        raise ConfigError(f"--profile: {origin}: {exc}") from None
    return profile


def _locate(spec: str) -> tuple[str, tuple[Path, ...], hub.Snapshot | None, str | None]:
    """The profile's name, its roots (deepest first), its hub snapshot, its built-in contract."""
    snapshot: hub.Snapshot | None = None
    contract: str | None = None
    if spec.startswith(hub.HUB_PREFIX):
        repo, revision = hub.parse(spec)
        contract = builtin_for_repo(repo)
        snapshot = hub.fetch(repo, revision)
        roots: tuple[Path, ...] = (snapshot.folder,)
        if contract is not None:
            roots += (BUILTIN_DIR / contract,)
        name = contract or repo
    else:
        name, root, base = parse_spec(spec)
        roots = _with_shared((root,) if base is None or base == root else (root, base))
        repository = _hub_source(root)
        if repository is not None:
            snapshot = hub.fetch(repository["repo"], repository["revision"])
            roots, contract = (snapshot.folder, root), name
    return name, roots, snapshot, contract


def _load_files(
    roots: Sequence[Path], settings: Mapping[str, Any]
) -> tuple[ChatTemplate, Tokenizer, str]:
    """Load the template and tokenizer of `roots`; also return where the template came from."""
    root = roots[0]
    config_file = _first(roots, "tokenizer_config.json")
    config = _read_json(config_file) if config_file is not None else {}
    variables = {
        key: text
        for key in ("bos_token", "eos_token", "unk_token", "pad_token")
        if (text := _token_text(config.get(key))) is not None
    }
    origin = str(root)
    try:
        source, origin = _template_source(roots, settings)
        template = ChatTemplate(source, variables)
        tokenizer = _tokenizer(roots, settings, config)
    except TemplateError as exc:
        raise ConfigError(f"--profile: {origin}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--profile: cannot read {root}: {exc}") from None
    except ConfigError:
        raise
    except Exception as exc:
        # tiktoken and tokenizers report a malformed file with a bare ValueError or
        # Exception; the user needs to know which folder holds it, in one line.
        raise ConfigError(
            f"--profile: the tokenizer in {root} does not load: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        ) from None
    return template, tokenizer, origin


def _with_shared(roots: Sequence[Path]) -> tuple[Path, ...]:
    """`roots`, each built-in one followed by the built-in whose tokenizer it shares."""
    out: list[Path] = []
    for root in roots:
        out.append(root)
        shared = SHARES_TOKENIZER.get(root.name) if root.parent == BUILTIN_DIR else None
        if shared is not None:
            out.append(BUILTIN_DIR / shared)
    return tuple(out)


def _hub_source(root: Path) -> Mapping[str, str] | None:
    """The hub repository of a built-in profile that ships no model files, else None."""
    if root.parent != BUILTIN_DIR or _tokenizer_file(_with_shared((root,)), None) is not None:
        return None
    source: Mapping[str, str] | None = builtin_contract(root.name).get("hub")
    return source


def _refuse_remote_code(spec: str, snapshot: hub.Snapshot, settings: Mapping[str, Any]) -> None:
    """A tokenizer that needs the repository's code is an error, unless a built-in knows it.

    Raises:
        ConfigError: the tokenizer is remote code and no built-in profile states its
            local equivalent.
    """
    needs = hub.remote_code_tokenizer(snapshot.folder)
    if needs is None or settings.get("tokenizer", {}).get("pat_str"):
        return
    raise ConfigError(
        f"--profile {spec}: the tokenizer is the repository's own code ({needs}, "
        f"trust_remote_code), which the verifier never runs; give a folder with tokenizer.json, "
        f"or NAME:PATH over a built-in profile that states its equivalent "
        f"({', '.join(BUILTIN)})"
    )


def builtin_for_repo(repo: str) -> str | None:
    """The built-in profile whose ``hub`` repository or ``served_models`` name `repo`, or None."""
    for name in builtin_names():
        source = builtin_contract(name).get("hub") or {}
        if str(source.get("repo", "")).casefold() == repo.casefold():
            return name
    return profile_for_model(repo)


def load_gguf_profile(path: Path) -> Profile:
    """The profile of a GGUF file: its embedded chat template and tokenizer.

    Raises:
        ConfigError: the file is not a GGUF file, has no chat template, or describes a
            tokenizer :mod:`.gguf` does not build (one line naming what).
    """
    where = f"{GGUF_PREFIX}{path}"
    meta = gguf.read_metadata(path)
    if not meta.chat_template:
        raise ConfigError(f"--profile {where}: the file has no tokenizer.chat_template")
    try:
        template = ChatTemplate(meta.chat_template, gguf.template_variables(meta))
        tokenizer = HFTokenizer(
            text=gguf.tokenizer_json(meta, where),
            name=f"{path.name} (gguf {meta.model}, pre {meta.pre})",
        )
    except TemplateError as exc:
        raise ConfigError(f"--profile {where}: tokenizer.chat_template: {exc}") from None
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"--profile {where}: the tokenizer does not build: "
            f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        ) from None
    # The file states the model's window, as a release's config.json does.
    settings: dict[str, Any] = {}
    if meta.context_length is not None:
        settings["limits"] = {"context_tokens": meta.context_length}
    if meta.rope_scaling is not None:
        settings["rope_scaling"] = rope_scaling(*meta.rope_scaling)
    profile = Profile(
        path.stem,
        path.resolve(),
        template,
        tokenizer,
        settings,
        bos_id=meta.bos_id if meta.add_bos else None,
    )
    try:
        profile.prompt_ids([{"role": "user", "content": "Hello"}])
    except TemplateError as exc:
        raise ConfigError(f"--profile {where}: tokenizer.chat_template: {exc}") from None
    return profile


def model_key(model: str) -> str:
    """How served model ids compare: case-insensitively, by their last ``/`` part."""
    return model.rstrip("/").rpartition("/")[2].casefold()


def profile_for_model(model: str | None) -> str | None:
    """The built-in profile whose ``served_models`` name `model`, or None.

    Ids compare case-insensitively, whole or by their last ``/``-separated part, so that
    ``accounts/vendor/models/kimi-k2-instruct`` selects the profile that lists
    ``moonshotai/Kimi-K2-Instruct``.
    """
    if not model:
        return None
    wanted = model_key(model)
    for name in builtin_names():
        served = builtin_contract(name).get("served_models", [])
        if any(model_key(m) == wanted for m in served):
            return name
    return None
