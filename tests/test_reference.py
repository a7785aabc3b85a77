"""The local reference: chat templates, tokenizers (Kimi tiktoken, a small trained one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.errors import ConfigError
from verifier.reference.profiles import BUILTIN_DIR, Profile, load_profile
from verifier.reference.template import ChatTemplate, TemplateError
from verifier.reference.tokenizer_backends import KIMI_PAT_STR, encode_all_special, encode_prompt

KIMI = BUILTIN_DIR / "kimi-k2"


@pytest.fixture(scope="module")
def kimi() -> Profile:
    return load_profile("kimi-k2")


def test_kimi_known_values(kimi: Profile) -> None:
    """The values the reference folder's README states."""
    ids = kimi.prompt_ids([{"role": "user", "content": "Hello, world! 你好"}])
    assert len(ids) == 32
    assert ids[:3] == [163594, 14062, 163601] and ids[-3:] == [163588, 69702, 163601]
    assert len(kimi.prompt_ids([{"role": "user", "content": "Hello!"}])) == 28


def test_the_built_in_regex_is_the_published_one() -> None:
    assert json.loads((KIMI / "tokenizer_spec.json").read_text())["pat_str"] == KIMI_PAT_STR


def test_kimi_special_tokens_are_all_256(kimi: Profile) -> None:
    specials = kimi.tokenizer.special_tokens
    assert len(specials) == 256
    assert specials["<|im_end|>"] == 163586 and specials["<|reserved_token_163700|>"] == 163700


@pytest.mark.parametrize(
    "text", ["<|im_end|>", "<|im_middle|>", "say <|im_end|> now", "[BOS]<think>x</think>"]
)
def test_user_text_that_spells_special_tokens_stays_text(kimi: Profile, text: str) -> None:
    """Only what the template inserts is special, even when a message is exactly a special token."""
    empty = kimi.prompt_ids([{"role": "user", "content": ""}])
    ids = kimi.prompt_ids([{"role": "user", "content": text}])
    ordinary = kimi.tokenizer.encode_ordinary(text)
    assert len(ids) == len(empty) + len(ordinary)
    position = empty.index(163601, empty.index(163587)) + 1  # after the user's <|im_middle|>
    assert ids[position : position + len(ordinary)] == ordinary
    unsafe = encode_all_special(
        kimi.tokenizer, kimi.render([{"role": "user", "content": text}]).text
    )
    assert len(unsafe) < len(ids)


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_prompt_ids_decode_back_to_the_rendered_text(kimi: Profile, text: str) -> None:
    rendered = kimi.render([{"role": "user", "content": text}])
    assert kimi.tokenizer.decode(kimi.encode(rendered)) == rendered.text


def test_the_sandbox_refuses_python_internals() -> None:
    template = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(TemplateError, match="unsafe"):
        template.render([{"role": "user", "content": "x"}])
    with pytest.raises(TemplateError, match="does not parse"):
        ChatTemplate("{% for %}")
    raising = ChatTemplate("{{ raise_exception('no system role') }}")
    with pytest.raises(TemplateError, match="no system role"):
        raising.render([{"role": "user", "content": "x"}])


ORDERED = (
    "{% for m in messages %}{% for k, v in m.items() %}{{ k }}={{ v }};{% endfor %}{% endfor %}"
)


def test_a_conversation_rendered_again_is_remembered_in_its_own_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template = ChatTemplate(ORDERED, {"bos_token": "<s>"})
    fresh: list[object] = []
    real = ChatTemplate._render_fresh

    def counted(self: ChatTemplate, *args: object) -> object:
        fresh.append(args)
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ChatTemplate, "_render_fresh", counted)
    user = {"role": "user", "content": "hi"}
    first = template.render([user])
    assert template.render([dict(user)]) == first and len(fresh) == 1
    # The same keys in another order are another conversation to a template that loops on them.
    other = template.render([{"content": "hi", "role": "user"}])
    assert other.text == "content=hi;role=user;" != first.text and len(fresh) == 2
    # Other settings, other variables: rendered anew, each remembered apart.
    template.render([user], add_generation_prompt=False)
    template.with_variables({"bos_token": "<b>"}).render([user])
    assert len(fresh) == 4
    # A template that reads the clock renders every time.
    dated = ChatTemplate("{{ strftime_now('%Y') }}{{ messages[0].content }}")
    dated.render([user])
    dated.render([user])
    assert len(fresh) == 6


def test_rendering_does_not_change_the_callers_messages(kimi: Profile) -> None:
    messages = [{"role": "user", "content": "a <|im_end|> b"}]
    before = json.dumps(messages)
    kimi.render(messages)
    assert json.dumps(messages) == before


def test_encode_prompt_keeps_ordinary_spans() -> None:
    class Toy:
        name = digest = "toy"
        special_tokens = {"<s>": 99}

        def encode_ordinary(self, text: str) -> list[int]:
            return [ord(c) for c in text]

        def decode(self, ids: list[int]) -> str:
            return "".join(chr(i) for i in ids)

        def vocab_size(self) -> int:
            return 100

    text = "<s>a<s>"
    assert encode_prompt(Toy(), text) == [99, ord("a"), 99]
    assert encode_prompt(Toy(), text, [(4, 7)]) == [99, ord("a"), *map(ord, "<s>")]


def test_the_small_trained_tokenizer_profile(small_profile: Profile) -> None:
    ids = small_profile.prompt_ids(
        [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hello"}]
    )
    specials = small_profile.tokenizer.special_tokens
    assert ids[0] == specials["<s>"] and specials["<|user|>"] in ids
    assert small_profile.tokenizer.decode(ids).startswith("<s><|system|>")
    text = "<|user|> is a token"
    hygienic = small_profile.prompt_ids([{"role": "user", "content": text}])
    assert hygienic.count(specials["<|user|>"]) == 1, "only the template's <|user|> is special"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "is not a folder"),
        (lambda p: p.mkdir(), "has no chat template"),
        (
            lambda p: (p.mkdir(), (p / "chat_template.jinja").write_text("{{ x }}")),
            "has no tokenizer",
        ),
        (
            lambda p: (
                p.mkdir(),
                (p / "chat_template.jinja").write_text("x"),
                (p / "tiktoken.model").write_text(""),
            ),
            "needs its pre-tokenisation regex",
        ),
        (
            lambda p: (p.mkdir(), (p / "verifier-profile.json").write_text('{"tolerance": 1}')),
            "Additional properties are not allowed",
        ),
        (
            lambda p: (
                p.mkdir(),
                (p / "chat_template.jinja").write_text("x"),
                (p / "tiktoken.model").write_text("not base64 and no rank\n"),
                (p / "tokenizer_spec.json").write_text('{"pat_str": "\\\\w+"}'),
            ),
            r"the tokenizer in .*model does not load: ValueError: Error parsing line",
        ),
        (
            lambda p: (p.mkdir(), (p / "chat_template.jinja").write_bytes(b"\xff{{ x }}")),
            r"cannot read .*model: 'utf-8' codec can't decode byte 0xff",
        ),
    ],
)
def test_profile_errors_name_the_problem(tmp_path: Path, setup: object, message: str) -> None:
    folder = tmp_path / "model"
    setup(folder)  # type: ignore[operator]
    with pytest.raises(ConfigError, match=message):
        load_profile(str(folder))


def test_a_template_that_does_not_render_stops_the_load(
    tmp_path: Path, small_profile_dir: Path
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "tokenizer.json").write_bytes((small_profile_dir / "tokenizer.json").read_bytes())
    (folder / "chat_template.jinja").write_text("{{ messages[5]['content'] }}")
    with pytest.raises(
        ConfigError, match=r"--profile: .*broken/chat_template\.jinja: the chat template failed"
    ):
        load_profile(str(folder))
