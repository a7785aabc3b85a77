"""How the simulated vendor sees images and what they cost it.

It decodes the data URLs of the last user message and "sees" each image with
:func:`verifier.reference.images.describe` (the dominant colour, a digit if one is drawn), so
colour and digit questions have answers a correct vendor gives. Prompt tokens of
images follow an image-token rule: the profile's ``images`` rule, else 32-pixel tiles.
The vision defects of the catalogue bend what is seen and what is counted.
"""

from __future__ import annotations

import functools
import io
import threading
from collections.abc import Mapping
from typing import Any

from PIL import Image

from ..reference.image_tokens import image_tokens
from ..reference.images import decode_data_url, describe
from .defects import (
    VISION_FIRST_IMAGE_ONLY,
    VISION_IMAGES_IGNORED,
    VISION_JPEG_COSTS_MORE,
    VISION_ORDER_SWAPPED,
    VISION_STALE_CACHE,
    VISION_TOKEN_MISCOUNT_LARGE,
    VISION_WEBP_UNSUPPORTED_SILENTLY,
    Defects,
)

DEFAULT_RULE: Mapping[str, Any] = {"rule": "tiles", "tile": 32, "extra_tokens": 2}
# vision-token-miscount-large: images with a side over this many pixels are counted twice.
LARGE_SIDE = 512
ORDINALS = (
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split()
)


def image_parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The image_url parts of a message, in order."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"]


@functools.lru_cache(maxsize=64)
def _sight(data: bytes) -> dict[str, Any]:
    """What the model sees in an image file.

    Kept by content, as serving engines keep processed images by their hash (vLLM's
    multimodal cache): the same bytes are decoded once, a 4096x4096 picture is 0.2 s of CPU.
    """
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return describe(image)


def _size(part: Mapping[str, Any]) -> tuple[int, int]:
    """(width, height) of a part the request validation already accepted, from its header."""
    _, data = decode_data_url(part["image_url"]["url"])
    with Image.open(io.BytesIO(data)) as image:
        return image.size


def _texts(message: Mapping[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [p.get("text", "") for p in content or [] if isinstance(p, dict)]


def without_images(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request with its image parts taken out (they are counted by the image rule)."""
    messages = []
    for message in request.get("messages", []):
        if image_parts(message):
            parts = [p for p in message["content"] if p.get("type") != "image_url"]
            message = {**message, "content": parts}
        messages.append(message)
    return {**request, "messages": messages}


def ordinal(index: int) -> str:
    """'first', 'second', ... ('image 12' past the ninth)."""
    return ORDINALS[index] if index < len(ORDINALS) else f"number {index + 1}"


def answer(seen: list[dict[str, Any]]) -> str:
    """What the model says about the images it saw."""
    if not seen:
        return "I cannot see any image in your message."
    said = []
    for index, sight in enumerate(seen):
        what = f"is {sight['colour']}" if sight else "shows nothing I can make out"
        if sight and sight.get("digit") is not None:
            what = f"shows the digit {sight['digit']} in {sight['colour']}"
        said.append(f"The {ordinal(index)} image {what}.")
    return " ".join(said)


class Eyes:
    """The vendor's image pipeline: decode, see, cache, count."""

    def __init__(self, defects: Defects, rule: Mapping[str, Any] | None = None) -> None:
        self.defects = defects
        self.rule = rule or DEFAULT_RULE
        self._cache: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def look(self, request: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """What the model sees in the last user message's images; None when it has none."""
        users = [m for m in request.get("messages", []) if m.get("role") == "user"]
        parts = image_parts(users[-1]) if users else []
        if not parts:
            return None
        defects = self.defects
        if defects.has(VISION_IMAGES_IGNORED):
            return []
        # A cache keyed by the prompt's text alone serves one image's answer for another.
        key = repr([_texts(m) for m in request.get("messages", [])])
        if defects.has(VISION_STALE_CACHE):
            with self._lock:
                if key in self._cache:
                    return self._cache[key]
        seen = []
        for part in parts:
            mime, data = decode_data_url(part["image_url"]["url"])
            blind = mime == "image/webp" and defects.has(VISION_WEBP_UNSUPPORTED_SILENTLY)
            seen.append({} if blind else dict(_sight(data)))
        if defects.has(VISION_FIRST_IMAGE_ONLY):
            seen = [seen[0]] * len(seen)
        if defects.has(VISION_ORDER_SWAPPED):
            seen.reverse()
        if defects.has(VISION_STALE_CACHE):
            with self._lock:
                self._cache.setdefault(key, seen)
        return seen

    def prompt_tokens(self, request: Mapping[str, Any]) -> int:
        """The prompt tokens of every image in the request, by the rule."""
        if self.defects.has(VISION_IMAGES_IGNORED):
            return 0
        total = 0
        for message in request.get("messages", []):
            for part in image_parts(message):
                width, height = _size(part)
                cost = image_tokens(width, height, self.rule)
                large = max(width, height) > LARGE_SIDE
                if large and self.defects.has(VISION_TOKEN_MISCOUNT_LARGE):
                    cost *= 2
                if self.defects.has(VISION_JPEG_COSTS_MORE):
                    cost += decode_data_url(part["image_url"]["url"])[0] == "image/jpeg"
                total += cost
        return total
