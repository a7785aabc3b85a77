"""Images made locally with Pillow from a small spec, and read back the same way.

Vision cases describe their images as data (``{"kind": "solid", "color": "red",
"size": [64, 64], "format": "png"}``); nothing is fetched. The same module lets
the simulated vendor "see": it reads a solid colour from the pixels and a digit
by matching it against digits rendered with the same font.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any, cast

import PIL
from PIL import Image, ImageDraw, ImageFont, features

from .. import cache

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 160, 60),
    "blue": (30, 60, 220),
    "yellow": (240, 220, 40),
    "orange": (245, 140, 20),
    "purple": (130, 40, 170),
    "black": (10, 10, 10),
    "white": (250, 250, 250),
}
FORMATS = {"png": "PNG", "jpeg": "JPEG", "webp": "WEBP", "gif": "GIF"}
MIME = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp", "gif": "image/gif"}
GLYPH = 32  # side of the normalised glyph masks digits are compared with
# Ink further than this from every digit (pixels of GLYPH x GLYPH differing) is not a digit:
# rendered digits of any size and aspect stay under 160, shapes and words are over 400.
NOT_A_DIGIT = 300
# Squared RGB distance under which a pixel is taken to be of its nearest named colour.
PURE = 40**2 * 3


def make_image(spec: Mapping[str, Any]) -> Image.Image:
    """The image a spec describes: ``solid`` colour; ``digit``, ``word``, ``shape`` on white."""
    width, height = spec.get("size", [64, 64])
    kind = spec.get("kind", "solid")
    if kind == "solid":
        return Image.new("RGB", (width, height), COLOURS[spec["color"]])
    image = Image.new("RGB", (width, height), COLOURS["white"])
    draw = ImageDraw.Draw(image)
    if kind in ("digit", "word"):
        text = str(spec["digit"] if kind == "digit" else spec["word"])
        size = max(8, int(min(width, height) * (0.8 if kind == "digit" else 0.5)))
        font = ImageFont.load_default(size=size)
        draw.text(
            (width / 2, height / 2),
            text,
            font=font,
            fill=COLOURS[spec.get("color", "black")],
            anchor="mm",
        )
    elif kind == "shape":
        box = (width * 0.2, height * 0.2, width * 0.8, height * 0.8)
        fill = COLOURS[spec.get("color", "black")]
        if spec["shape"] == "circle":
            draw.ellipse(box, fill=fill)
        else:
            draw.rectangle(box, fill=fill)
    else:
        raise ValueError(f"unknown image kind {kind!r}")
    return image


def encode(image: Image.Image, fmt: str) -> bytes:
    """The image's bytes in one of png, jpeg, webp, gif (jpeg at high quality, no surprises)."""
    buffer = io.BytesIO()
    options = {"quality": 95} if fmt in ("jpeg", "webp") else {}
    image.save(buffer, FORMATS[fmt], **options)
    return buffer.getvalue()


def data_url(data: bytes, mime: str) -> str:
    """A ``data:`` URL carrying `data`."""
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_part(spec: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part for a spec (format and detail from the spec)."""
    pixels = {key: value for key, value in spec.items() if key != "detail"}
    part: dict[str, Any] = {"url": _image_url(json.dumps(pixels, sort_keys=True))}
    if "detail" in spec:
        part["detail"] = spec["detail"]
    return {"type": "image_url", "image_url": part}


# The cache's name for encoded images, by the sha256 of their spec and of the renderer.
IMAGES = "images"


@functools.lru_cache(maxsize=256)
def _image_url(spec_json: str) -> str:
    """The data URL of a spec given as canonical JSON, made once per process.

    A 4096 x 4096 image costs a quarter of a second of CPU, which cases in flight would
    otherwise wait on; the encoded bytes are also kept in the verifier's cache, so that a
    later run only reads them.
    """
    spec = json.loads(spec_json)
    fmt = spec.get("format", "png")
    key = hashlib.sha256(f"{_renderer()}\0{spec_json}".encode()).hexdigest()
    data = cache.read(IMAGES, key)
    if data is None:
        data = encode(make_image(spec), fmt)
        cache.write(IMAGES, key, data)
    return data_url(data, MIME[fmt])


@functools.cache
def _renderer() -> str:
    """What an image's bytes depend on besides its spec: Pillow and its FreeType (text)."""
    return f"Pillow {PIL.__version__}, FreeType {features.version('freetype2')}"


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def zero_size_png() -> bytes:
    """A PNG whose header says 0 x 0 pixels (well-formed chunks, impossible image)."""
    header = struct.pack(">IIBBBBB", 0, 0, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IEND", b"")


def invalid_part(kind: str, *, max_side: int | None = None) -> dict[str, Any]:
    """An image part a correct server must refuse: bad base64, not an image, truncated, ..."""
    png = encode(make_image({"kind": "solid", "color": "red", "size": [64, 64]}), "png")
    urls = {
        "bad_base64": "data:image/png;base64,!!!this is not base64!!!",
        "not_image": data_url(b"hello, I am plain text and not an image", "image/png"),
        "truncated_png": data_url(png[: len(png) // 2], "image/png"),
        "zero_size": data_url(zero_size_png(), "image/png"),
        "file_url": "file:///etc/passwd",
        "ftp_url": "ftp://127.0.0.1/image.png",
    }
    if kind == "oversize":
        if max_side is None:
            raise ValueError("oversize needs the documented limit")
        side = max_side + 1
        url = data_url(encode(Image.new("RGB", (side, side), COLOURS["red"]), "png"), "image/png")
    else:
        url = urls[kind]
    return {"type": "image_url", "image_url": {"url": url}}


def decode_data_url(url: str) -> tuple[str, bytes]:
    """(mime, bytes) of a base64 data URL.

    Raises:
        ValueError: not a base64 data URL.
    """
    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError("not a base64 data URL")
    header, payload = url[5:].split(";base64,", 1)
    return header, base64.b64decode(payload, validate=True)


def nearest_colour(rgb: tuple[int, ...]) -> str:
    """The named colour closest to an RGB value."""
    return min(
        COLOURS,
        key=lambda name: sum((a - b) ** 2 for a, b in zip(COLOURS[name], rgb[:3], strict=False)),
    )


def _mask(image: Image.Image) -> bytes | None:
    """The dark pixels of an image, cropped to their bounding box and scaled to GLYPH x GLYPH."""
    gray = image.convert("L")
    ink = gray.point(lambda v: 255 if v < 128 else 0)
    box = ink.getbbox()
    if box is None:
        return None
    return ink.crop(box).resize((GLYPH, GLYPH)).point(lambda v: 1 if v >= 128 else 0).tobytes()


@functools.cache
def _digit_masks() -> dict[int, bytes]:
    masks = {}
    for digit in range(10):
        mask = _mask(make_image({"kind": "digit", "digit": digit, "size": [128, 128]}))
        assert mask is not None
        masks[digit] = mask
    return masks


def read_digit(image: Image.Image) -> int | None:
    """The digit drawn in an image, by the nearest rendered digit; None when there is none."""
    mask = _mask(image)
    if mask is None:
        return None
    distances = {
        digit: sum(a != b for a, b in zip(glyph, mask, strict=True))
        for digit, glyph in _digit_masks().items()
    }
    best = min(distances, key=distances.__getitem__)
    return best if distances[best] < NOT_A_DIGIT else None


def describe(image: Image.Image) -> dict[str, Any]:
    """What the simulated vendor "sees": the dominant colour, and a digit if there is ink."""
    # Nearest-neighbour keeps the pixels' own colours; blending would turn black ink grey.
    # Picking pixels first and converting the few picked is the same as the other way round,
    # without converting every pixel of a large image.
    picked = image.resize((min(image.width, 128), min(image.height, 128)), Image.Resampling.NEAREST)
    small = picked.convert("RGB")
    counts: dict[str, int] = {}
    # An RGB image's colours are (r, g, b) tuples (Pillow's stubs allow one band's float too).
    for count, pixel in cast(
        list[tuple[int, tuple[int, int, int]]], small.getcolors(maxcolors=128 * 128) or []
    ):
        name = nearest_colour(pixel)
        # Anti-aliased edge pixels are blends; only pixels near a named colour count.
        if sum((a - b) ** 2 for a, b in zip(COLOURS[name], pixel, strict=True)) < PURE:
            counts[name] = counts.get(name, 0) + count
    ink = {name: count for name, count in counts.items() if name != "white"}
    colour = max(ink, key=ink.__getitem__) if ink else "white"
    digit = read_digit(image) if "white" in counts and ink else None
    return {"colour": colour, "digit": digit}
