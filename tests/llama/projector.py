"""A tiny random-weight Kimi K2.5 vision projector (mmproj GGUF) for llama-server's ``--mmproj``.

It pairs with the tiny text model in ``text_model.py``: the weights are noise, so the
model "sees" nothing, but llama-server loads it, accepts images and charges them
prompt tokens by Kimi K2.5's own rule, which is what the tests need. The layout
follows llama.cpp's ``kimik25`` projector (``tools/mtmd/clip.cpp`` and
``tools/mtmd/models/kimik25.cpp``) and what its converter writes
(``conversion/kimivl.py``):

- a 2-layer ViT of width 32 on 8x8 patches, with a learned 4x4 position grid that
  llama.cpp interpolates to each image's patch grid;
- a 2x2 patch merger, then layer norm and a 2-layer GELU MLP into the text model's
  embedding width (it must equal the text model's ``n_embd`` or the server refuses
  to start).

Images are resized so that their side lengths are multiples of 16 pixels (patch 8
times merge 2) and they cost between 4 and 256 merged tokens, plus the two
``<|media_begin|>``/``<|media_end|>`` markers.

Everything is seeded: the file is byte-identical on every run.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from .text_model import N_EMBD as TEXT_N_EMBD

N_EMBD = 32  # vision width
N_FF = 64  # must differ from N_EMBD
N_HEAD = 2  # head size 16: 2D RoPE splits each head into x and y halves of even length
N_LAYER = 2
PATCH = 8
MERGE = 2
GRID = 4  # the learned position grid is GRID x GRID patches
IMAGE_SIZE = GRID * PATCH
MIN_TOKENS = 4
MAX_TOKENS = 256
# clip.cpp reads kimik25's limits as pixel counts of the resized image; one merged token
# covers a (PATCH * MERGE)^2 square of pixels.
PIXELS_PER_TOKEN = (PATCH * MERGE) ** 2
EPS = 1e-5
SEED = 20261201


def tensors() -> dict[str, np.ndarray]:
    """All weights by GGUF name, in numpy order (the reverse of the ggml shapes in clip.cpp)."""
    rng = np.random.default_rng(SEED)

    def noise(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, shape).astype(np.float32)

    def ones(size: int) -> np.ndarray:
        return np.ones(size, dtype=np.float32)

    def zeros(size: int) -> np.ndarray:
        return np.zeros(size, dtype=np.float32)

    merged = N_EMBD * MERGE * MERGE
    out = {
        "v.patch_embd.weight": noise(N_EMBD, 3, PATCH, PATCH),  # a conv2d kernel
        "v.patch_embd.bias": noise(N_EMBD),
        # kimik25 stores the grid as ggml [C, W, H], not flattened like other projectors.
        "v.position_embd.weight": noise(GRID, GRID, N_EMBD),
    }
    for layer in range(N_LAYER):
        prefix = f"v.blk.{layer}"
        for norm in ("ln1", "ln2"):
            out[f"{prefix}.{norm}.weight"] = ones(N_EMBD)
            out[f"{prefix}.{norm}.bias"] = zeros(N_EMBD)
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            out[f"{prefix}.{name}.weight"] = noise(N_EMBD, N_EMBD)
            out[f"{prefix}.{name}.bias"] = noise(N_EMBD)
        out[f"{prefix}.ffn_up.weight"] = noise(N_FF, N_EMBD)
        out[f"{prefix}.ffn_up.bias"] = noise(N_FF)
        out[f"{prefix}.ffn_down.weight"] = noise(N_EMBD, N_FF)
        out[f"{prefix}.ffn_down.bias"] = noise(N_EMBD)
    # The norm acts on each patch's N_EMBD features before the merged 2x2 block enters the MLP.
    out["mm.input_norm.weight"] = ones(N_EMBD)
    out["mm.input_norm.bias"] = zeros(N_EMBD)
    out["mm.1.weight"] = noise(TEXT_N_EMBD, merged)
    out["mm.1.bias"] = noise(TEXT_N_EMBD)
    out["mm.2.weight"] = noise(TEXT_N_EMBD, TEXT_N_EMBD)
    out["mm.2.bias"] = noise(TEXT_N_EMBD)
    return out


def write_projector(path: Path) -> None:
    """Write a tiny random-weight Kimi K2.5 vision projector (mmproj) GGUF to `path`.

    It goes through a temporary file and a rename, so a crash leaves no half file.
    """
    # A name of its own, so it cannot collide with the text model's temporary file.
    temp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(str(temp), "clip")
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name("tiny-kimi-k25-test-projector")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type(gguf.VisionProjectorType.KIMIK25)
    writer.add_vision_projection_dim(TEXT_N_EMBD)
    writer.add_vision_image_size(IMAGE_SIZE)
    writer.add_vision_patch_size(PATCH)
    writer.add_vision_embedding_length(N_EMBD)
    writer.add_vision_feed_forward_length(N_FF)
    writer.add_vision_block_count(N_LAYER)
    writer.add_vision_head_count(N_HEAD)
    writer.add_vision_attention_layernorm_eps(EPS)
    writer.add_vision_image_mean([0.5, 0.5, 0.5])
    writer.add_vision_image_std([0.5, 0.5, 0.5])
    # Kimi K2.5's MLPs use exact GELU; without this key clip.cpp would pick gelu_quick.
    writer.add_vision_use_gelu(True)
    writer.add_vision_projector_scale_factor(MERGE)
    # clip.cpp uses these only when both are set, and then ignores llama-server's
    # --image-min-tokens/--image-max-tokens for kimik25.
    writer.add_vision_min_pixels(MIN_TOKENS * PIXELS_PER_TOKEN)
    writer.add_vision_max_pixels(MAX_TOKENS * PIXELS_PER_TOKEN)
    for name, data in tensors().items():
        writer.add_tensor(name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    temp.replace(path)
