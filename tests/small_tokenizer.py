"""A small tokenizer trained inside the tests, with a chat template of our own: a second reference.

Byte-level BPE trained with the `tokenizers` library on the project's own case files (so the
result is the same on every machine), saved as tokenizer.json beside a tokenizer_config.json
that names the BOS token and the template.
"""

from __future__ import annotations

import json
from pathlib import Path

SPECIALS = [
    "<s>",
    "</s>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|tool|>",
    "<|end|>",
    "<think>",
    "</think>",
]
# Reasoning is rendered for the assistant turns after the last user message (the current
# tool-call loop), as Kimi K2 Thinking's and Qwen3's templates do; thinking off writes an
# empty think block after the generation prompt, as Qwen3's does.
TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(last=-1) %}"
    "{% for m in messages %}{% if m['role'] == 'user' %}{% set ns.last = loop.index0 %}"
    "{% endif %}{% endfor %}"
    "{% for m in messages %}"
    "<|{{ m['role'] }}|>"
    "{% if m['role'] == 'assistant' and m.get('reasoning_content') and loop.index0 > ns.last %}"
    "<think>{{ m['reasoning_content'] }}</think>{% endif %}"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% elif m['content'] %}{% for part in m['content'] %}{{ part['text'] }}{% endfor %}{% endif %}"
    "{% for call in m.get('tool_calls') or [] %}[call {{ call['function']['name'] }} "
    "{{ call['function']['arguments'] }}]{% endfor %}"
    "<|end|>\n"
    "{% endfor %}"
    "{% if tools %}<|system|>tools: {{ tools | tojson }}<|end|>\n{% endif %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if thinking is defined and not thinking %}<think></think>{% endif %}{% endif %}"
)


# The model's policies, as a vendor would document them.
POLICIES = {
    "thinking": {
        "on": {"chat_template_kwargs": {"thinking": True}},
        "off": {"chat_template_kwargs": {"thinking": False}},
    },
    "sampling": {
        "temperature": {"min": 0, "max": 1},
        "top_p": {"min": 0, "max": 1},
        # One pin the vendor must refuse other values of, one it must accept and replace.
        "frequency_penalty": {"fixed": 0, "off_policy": "reject"},
        "presence_penalty": {"fixed": 0, "off_policy": "coerce"},
    },
    "reasoning": {
        "field": "reasoning_content",
        "tags": {"start": "<think>", "end": "</think>"},
        "tool_markers": ["[call "],
        "effort": {"field": "reasoning_effort", "levels": ["low", "medium", "high"]},
        "history": "tool_turns",
        "tool_turns_need_reasoning": True,
    },
    "served_models": ["small-test-model"],
    "features": {"partial_prefill": True, "dynamic_tools": True},
    # Sampling values of a generation config, applied where a request omits them (Qwen3's).
    "generation_defaults": {"temperature": 0.6, "top_p": 0.95, "top_k": 20},
    "seed_supported": True,
    "images": {
        "rule": "kimi-k25",
        "patch_size": 14,
        "merge": 2,
        "min_tokens": 4,
        "max_tokens": 1024,
        "extra_tokens": 2,
        "max_side": 2048,
    },
}


def training_text(repo: Path) -> list[str]:
    """Lines of the case files: varied English, code, JSON and other scripts."""
    lines = []
    for path in sorted((repo / "cases").rglob("*.jsonl")):
        lines += path.read_text(encoding="utf-8").splitlines()
    return lines


def build(folder: Path, repo: Path) -> Path:
    """Train the tokenizer and write the profile folder; returns it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2000,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(training_text(repo), trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"bos_token": "<s>", "eos_token": "</s>", "chat_template": TEMPLATE}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "verifier-profile.json").write_text(json.dumps(POLICIES), encoding="utf-8")
    return folder
