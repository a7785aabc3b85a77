"""A tiny llama-architecture GGUF with the real Kimi K2 vocabulary and chat template.

The weights are made, not trained: every transformer block writes zeros into the
residual stream (attention output and FFN down projections are zero), so the
logits depend only on the current token, which makes the model a bigram table
we design. One embedding dimension is constant, so the output matrix holds a
per-token bias; a few more dimensions carry chosen transitions:

- after ``<|im_middle|>`` (the end of the assistant header) comes ``Hello``,
  then ``!``, then ``<|im_end|>`` (the end-of-generation token): plain chat
  answers "Hello!" in three tokens; where a grammar forbids ending there (a
  tool call is required), ``<|tool_call_begin|>`` comes next, so the server's
  tool-call grammar and parser produce a real call;
- otherwise the biases rank ``<|im_end|>`` first, then tokens that close JSON
  (``}``, ``]``, ``"``), then ``,`` and digits: under a grammar, constrained
  output closes as early as the grammar allows.

The thinking variant (``thinking=True``, with Kimi K2 Thinking's chat template embedded)
reasons first: after ``<|im_middle|>`` comes ``<think>``, the reasoning "The user greets me",
``</think>``, then the same "Hello!".

Everything is seeded: the file is byte-identical on every run.
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import tiktoken
from tiktoken.load import load_tiktoken_bpe

N_EMBD = 64
N_HEAD = 4
N_HEAD_KV = 2
N_FF = 128
N_LAYER = 2
N_CTX = 8192
SPECIAL_BASE = 163584
N_SPECIAL = 256
BOS_ID = 163584
EOS_ID = 163586  # <|im_end|>
IM_MIDDLE = "<|im_middle|>"
# What the thinking variant reasons, between <think> and </think>.
REASONING = "The user greets me"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (as in every byte-level BPE)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars), strict=True))


def bpe_parts(ranks: dict[bytes, int], token: bytes, max_rank: int) -> list[bytes]:
    """Re-run BPE on `token` using only merges ranked below `max_rank` (llama.cpp's converter)."""
    parts = [bytes([b]) for b in token]
    while True:
        best_index, best_rank = -1, None
        for index in range(len(parts) - 1):
            rank = ranks.get(parts[index] + parts[index + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_index, best_rank = index, rank
        if best_rank is None or best_rank >= max_rank:
            return parts
        parts[best_index : best_index + 2] = [parts[best_index] + parts[best_index + 1]]


def special_tokens(reference: Path) -> dict[int, str]:
    """Names of ids 163584..163839: from tokenizer_config.json, else ``<|reserved_token_{id}|>``."""
    config = json.loads((reference / "tokenizer_config.json").read_text())
    named = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
    return {
        i: named.get(i, f"<|reserved_token_{i}|>")
        for i in range(SPECIAL_BASE, SPECIAL_BASE + N_SPECIAL)
    }


def kimi_encoding(reference: Path) -> tiktoken.Encoding:
    """The reference Kimi tokenizer (tiktoken, local files only)."""
    spec = json.loads((reference / "tokenizer_spec.json").read_text())
    return tiktoken.Encoding(
        name="kimi-k2-reference",
        pat_str=spec["pat_str"],
        mergeable_ranks=load_tiktoken_bpe(str(reference / spec["vocab_file"])),
        special_tokens={name: i for i, name in special_tokens(reference).items()},
    )


def vocabulary(reference: Path) -> tuple[list[str], list[int], list[str]]:
    """Token strings (byte-level form), token types and merges, as llama.cpp's converter does."""
    ranks = load_tiktoken_bpe(str(reference / "tiktoken.model"))
    to_unicode = bytes_to_unicode()

    def text(token: bytes) -> str:
        return "".join(to_unicode[b] for b in token)

    tokens = [""] * (SPECIAL_BASE + N_SPECIAL)
    types = [gguf.TokenType.NORMAL] * len(tokens)
    merges = []
    for token, rank in ranks.items():
        tokens[rank] = text(token)
        if len(token) > 1:
            parts = bpe_parts(ranks, token, rank)
            if len(parts) == 2:
                merges.append(f"{text(parts[0])} {text(parts[1])}")
    for index, name in special_tokens(reference).items():
        tokens[index] = name
        types[index] = gguf.TokenType.CONTROL
    return tokens, [int(t) for t in types], merges


def weights(
    encoding: tiktoken.Encoding, n_vocab: int, *, thinking: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Token embeddings and the output matrix of the designed bigram model."""
    rng = np.random.default_rng(20261130)
    embed = rng.normal(0.0, 0.01, (n_vocab, N_EMBD)).astype(np.float32)
    output = rng.normal(0.0, 0.01, (n_vocab, N_EMBD)).astype(np.float32)
    embed[:, 0] = 1.0  # the bias carrier
    output[:, 0] = 0.0

    def ids(text: str) -> list[int]:
        return encoding.encode(text, allowed_special="all")

    output[SPECIAL_BASE:, 0] = -10.0  # never emit other special tokens
    # Whitespace only pads constrained JSON: rank every token that holds any below the rest.
    for token in range(SPECIAL_BASE):
        if any(byte in b" \t\r\n" for byte in encoding.decode_single_token_bytes(token)):
            output[token, 0] = -2.0
    biases = {EOS_ID: 10.0}
    structure = (
        ("}", 9.0),
        ("]", 9.0),
        ('"', 8.0),
        (",", 5.0),
        ("1", 4.0),
        ("0", 3.5),
        ("null", 3.0),
        ("{", 2.0),
        ("[", 2.0),
        (":", 2.0),
    )
    for text, bias in structure:
        for token in ids(text):
            biases[token] = bias
    for token, bias in biases.items():
        output[token, 0] = bias
    # Chosen transitions, one dimension each: current tokens -> preferred next tokens.
    # The greeting chain; then, when a grammar forbids ending after the greeting (a tool call
    # is required), a call opens, its id ends after one digit, and its arguments follow;
    # after a quote or a closing bracket a quote comes first (so that a string the grammar
    # opens is closed at once, and ends as soon as the grammar lets it).
    hello, bang, quote = ids("Hello")[0], ids("!")[0], ids('"')[0]
    section, call, arguments = (
        ids(name)[0]
        for name in (
            "<|tool_calls_section_begin|>",
            "<|tool_call_begin|>",
            "<|tool_call_argument_begin|>",
        )
    )
    transitions: list[tuple[list[int], dict[int, float]]] = [
        ([ids(IM_MIDDLE)[0]], {hello: 20.0}),
        ([hello], {bang: 20.0}),
        ([bang], {EOS_ID: 20.0, call: 15.0, section: 12.0}),
        ([section], {call: 20.0}),
        ([ids("0")[0], ids("1")[0]], {arguments: 20.0}),
        ([quote, ids("}")[0], ids("]")[0]], {quote: 20.0}),
    ]
    if thinking:
        # <|im_middle|> opens the reasoning instead; its tokens follow one another, then the
        # greeting after </think>.
        chain = [ids("<think>")[0], *ids(REASONING), ids("</think>")[0], hello]
        transitions[0] = ([ids(IM_MIDDLE)[0]], {chain[0]: 20.0})
        transitions += [([a], {b: 20.0}) for a, b in zip(chain, chain[1:], strict=False)]
    for dim, (currents, followers) in enumerate(transitions, start=1):
        for current in currents:
            embed[current, dim] = 3.0
        for following, weight in followers.items():
            output[following, dim] = weight
    return embed, output


def write_text_model(
    path: Path, reference: Path, *, thinking: bool = False, template: Path | None = None
) -> None:
    """Write the model to `path` (via a temporary file, so a crash leaves no half file).

    Args:
        path: the GGUF file to write.
        reference: the folder of the Kimi tokenizer files (and the default chat template).
        thinking: the variant that reasons before it answers.
        template: the chat template to embed instead of the reference folder's.
    """
    tokens, types, merges = vocabulary(reference)
    encoding = kimi_encoding(reference)
    n_vocab = len(tokens)
    embed, output = weights(encoding, n_vocab, thinking=thinking)
    temp = path.with_suffix(".tmp")
    writer = gguf.GGUFWriter(str(temp), "llama")
    writer.add_name("tiny-kimi-vocab-test-model")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("kimi-k2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_add_bos_token(False)
    writer.add_chat_template((template or reference / "chat_template.jinja").read_text())

    rng = np.random.default_rng(7)
    writer.add_tensor("token_embd.weight", embed.astype(np.float16))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", output.astype(np.float16))
    head = N_EMBD // N_HEAD
    for layer in range(N_LAYER):
        prefix = f"blk.{layer}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name, shape in (
            ("attn_q", (N_EMBD, N_EMBD)),
            ("attn_k", (head * N_HEAD_KV, N_EMBD)),
            ("attn_v", (head * N_HEAD_KV, N_EMBD)),
            ("ffn_gate", (N_FF, N_EMBD)),
            ("ffn_up", (N_FF, N_EMBD)),
        ):
            writer.add_tensor(
                f"{prefix}.{name}.weight", rng.normal(0, 0.02, shape).astype(np.float32)
            )
        # Blocks add nothing to the residual stream: the model stays a designed bigram table.
        writer.add_tensor(
            f"{prefix}.attn_output.weight", np.zeros((N_EMBD, N_EMBD), dtype=np.float32)
        )
        writer.add_tensor(f"{prefix}.ffn_down.weight", np.zeros((N_EMBD, N_FF), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    temp.replace(path)
