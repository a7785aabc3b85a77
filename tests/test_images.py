"""Images made locally, seen back, and priced by the image-token rules (pure functions)."""

from __future__ import annotations

import base64
import binascii
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from verifier import cache
from verifier.reference import images
from verifier.reference.image_tokens import image_tokens
from verifier.reference.images import (
    COLOURS,
    decode_data_url,
    describe,
    encode,
    image_part,
    invalid_part,
    make_image,
    read_digit,
)
from verifier.simulator.validation import Policy, image_problem

KIMI_TEST = {"rule": "kimi-k25", "patch_size": 8, "merge": 2, "min_tokens": 4, "max_tokens": 256}


def seen(spec: dict[str, object], fmt: str = "png") -> dict[str, object]:
    """What the simulated vendor sees once the image has made the trip through `fmt`."""
    return describe(Image.open(io.BytesIO(encode(make_image(spec), fmt))))


@pytest.mark.parametrize(
    ("size", "tokens"),
    [((64, 64), 18), ((200, 200), 171), ((640, 480), 236), ((256, 256), 258), ((4096, 4096), 258)],
)
def test_kimi_k25_rule_gives_the_issue_s_known_values(size: tuple[int, int], tokens: int) -> None:
    assert image_tokens(*size, KIMI_TEST) == tokens


@pytest.mark.parametrize(("size", "tokens"), [((1, 1), 6), ((17, 300), 21), ((300, 17), 21)])
def test_kimi_k25_rule_matches_llama_server_on_edge_sizes(
    size: tuple[int, int], tokens: int
) -> None:
    """Measured on llama-server 11434 with the test projector (tests/test_realserver.py)."""
    assert image_tokens(*size, KIMI_TEST) == tokens


@given(st.integers(1, 4096), st.integers(1, 4096))
def test_kimi_k25_rule_stays_within_its_token_range(width: int, height: int) -> None:
    tokens = image_tokens(width, height, KIMI_TEST) - 2
    assert 4 <= tokens <= 256


@given(st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 64))
def test_tiles_rule_counts_whole_tiles(width: int, height: int, tile: int) -> None:
    tokens = image_tokens(width, height, {"rule": "tiles", "tile": tile, "extra_tokens": 0})
    assert (tokens - 1) * tile * tile < width * height + tile * (width + height) + tile * tile
    assert tokens * tile * tile >= width * height


def test_an_unknown_rule_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        image_tokens(64, 64, {"rule": "mystery"})


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(sorted(COLOURS)),
    st.integers(1, 300),
    st.integers(1, 300),
    st.sampled_from(["png", "jpeg", "webp", "gif"]),
)
def test_a_solid_colour_is_seen_in_every_format_and_size(
    colour: str, width: int, height: int, fmt: str
) -> None:
    assert seen({"kind": "solid", "color": colour, "size": [width, height]}, fmt) == {
        "colour": colour,
        "digit": None,
    }


@pytest.mark.parametrize("size", [(48, 48), (64, 64), (128, 128), (640, 480), (60, 200)])
@pytest.mark.parametrize("digit", range(10))
@pytest.mark.parametrize("fmt", ["png", "jpeg", "webp", "gif"])
def test_a_large_digit_is_read_back(size: tuple[int, int], digit: int, fmt: str) -> None:
    assert seen({"kind": "digit", "digit": digit, "size": list(size)}, fmt) == {
        "colour": "black",
        "digit": digit,
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "shape", "shape": "circle", "color": "red", "size": [200, 200]},
        {"kind": "shape", "shape": "square", "color": "blue", "size": [300, 200]},
        {"kind": "word", "word": "verify", "size": [512, 128]},
    ],
)
def test_shapes_and_words_are_not_taken_for_digits(spec: dict[str, object]) -> None:
    assert read_digit(make_image(spec)) is None
    assert seen(spec)["colour"] == spec.get("color", "black")


def test_an_image_part_is_a_data_url_of_the_asked_format_and_detail() -> None:
    part = image_part({"kind": "solid", "color": "red", "size": [5, 7], "format": "webp"})
    assert part["type"] == "image_url" and "detail" not in part["image_url"]
    mime, data = decode_data_url(part["image_url"]["url"])
    assert mime == "image/webp"
    with Image.open(io.BytesIO(data)) as image:
        assert (image.format, image.size) == ("WEBP", (5, 7))
    low = image_part({"kind": "solid", "color": "red", "detail": "low"})
    assert low["image_url"]["detail"] == "low"


def test_an_image_is_made_once_then_read_from_the_cache_and_a_damaged_entry_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    spec = {"kind": "digit", "digit": 7, "size": [96, 64], "format": "png"}
    made = image_part(spec)
    [entry] = (tmp_path / images.IMAGES).iterdir()
    # Another process: nothing in memory; the cached bytes are the same image's.
    images._image_url.cache_clear()

    def refuse(spec: object) -> None:
        raise AssertionError("made again")

    monkeypatch.setattr(images, "make_image", refuse)
    assert image_part(spec) == made
    # A damaged entry is no result: the image is made again, the same.
    entry.write_bytes(entry.read_bytes()[:-10])
    images._image_url.cache_clear()
    monkeypatch.undo()
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    assert cache.read(images.IMAGES, entry.name) is None
    assert image_part(spec) == made
    assert cache.read(images.IMAGES, entry.name) is not None


def test_decode_data_url_refuses_what_is_not_base64() -> None:
    with pytest.raises(ValueError, match="not a base64 data URL"):
        decode_data_url("http://127.0.0.1/image.png")
    with pytest.raises(binascii.Error):
        decode_data_url("data:image/png;base64,!!!")
    assert decode_data_url("data:image/png;base64," + base64.b64encode(b"x").decode()) == (
        "image/png",
        b"x",
    )


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        ("bad_base64", "not valid base64"),
        ("not_image", "cannot be decoded"),
        ("truncated_png", "cannot be decoded"),
        ("zero_size", "cannot be decoded"),
        ("oversize", "largest side allowed is 64"),
        ("file_url", "scheme 'file'"),
        ("ftp_url", "scheme 'ftp'"),
    ],
)
def test_every_invalid_part_is_refused_by_a_correct_vendor(kind: str, problem: str) -> None:
    part = invalid_part(kind, max_side=64)
    assert problem in (image_problem(part, Policy(max_side=64)) or "")


def test_oversize_needs_the_documented_limit() -> None:
    with pytest.raises(ValueError, match="documented limit"):
        invalid_part("oversize")


def test_a_text_only_vendor_refuses_every_image() -> None:
    part = image_part({"kind": "solid", "color": "red"})
    assert image_problem(part, Policy()) is None
    assert image_problem(part, Policy(vision=False)) == "this model does not accept images"
