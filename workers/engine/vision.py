"""How a vision-language model counts an image as input tokens, and reading an image's size.

One implementation, used by the simulated VLM worker for `usage.prompt_tokens` and by anything
that must estimate a request before the worker answers. Rules (`ImageTokenRule.kind`):

- `patch_merge` (Qwen2-VL and its family): the image is resized so that both sides are
  multiples of `patch_size · merge_size` and its area lies in `[min_pixels, max_pixels]`,
  keeping the aspect ratio (the processor's `smart_resize`); it then costs one token per
  merged patch, `h · w / (patch_size · merge_size)²`, plus `extra_tokens` (the vision start and
  end markers around it). A 448×448 image is 256 + 2 tokens.
- `fixed` (LLaVA-style): every image costs `tokens` + `extra_tokens`, whatever its size.

Sizes come from the image header (Pillow opens lazily and reads no pixel data), so measuring
a large image costs microseconds, not a decode.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
from typing import Literal

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field

MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""Largest decoded image accepted in a `data:` URL."""
MAX_IMAGE_SIDE = 16_384
"""Largest image side in pixels accepted (a header claiming more is refused)."""
MAX_IMAGE_PIXELS = 89_478_485
"""Most pixels an image may have: Pillow's own warning line (`Image.MAX_IMAGE_PIXELS`; it
refuses only twice as many). Below the side limit a 16,384 × 10,900 image of one colour is some
700 KB as base64 and decodes to about 535 MB in the worker."""
_DATA_URL = re.compile(r"data:(?P<mime>image/[\w.+-]+)?(?P<params>(;[\w.+-]+=[\w.+-]+)*);base64,")


class ImageError(ValueError):
    """An image part that cannot be measured: the message says why, for a 400."""


class ImageTokenRule(BaseModel):
    """A model's image-token rule (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["patch_merge", "fixed"] = "patch_merge"
    patch_size: int = Field(14, strict=True, ge=1)
    merge_size: int = Field(2, strict=True, ge=1)
    min_pixels: int = Field(56 * 56, strict=True, ge=1)
    max_pixels: int = Field(12_845_056, strict=True, ge=1)
    max_ratio: float = Field(200.0, strict=True, gt=1)
    """Longest side over shortest side beyond which the processor refuses the image."""
    tokens: int = Field(576, strict=True, ge=1)
    """Tokens per image for `fixed`."""
    extra_tokens: int = Field(2, strict=True, ge=0)
    """Marker tokens around each image (e.g. `<|vision_start|>` and `<|vision_end|>`)."""


def smart_resize(height: int, width: int, rule: ImageTokenRule) -> tuple[int, int]:
    """The size the processor resizes a `height × width` image to (`patch_merge` rules)."""
    if min(height, width) < 1:
        raise ImageError("the image has no pixels")
    if max(height, width) / min(height, width) > rule.max_ratio:
        raise ImageError(f"the image's aspect ratio is above {rule.max_ratio:g}")
    factor = rule.patch_size * rule.merge_size
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > rule.max_pixels:
        beta = math.sqrt(height * width / rule.max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < rule.min_pixels:
        beta = math.sqrt(rule.min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def image_tokens(rule: ImageTokenRule, width: int, height: int) -> int:
    """Input tokens one `width × height` image costs under `rule`."""
    if rule.kind == "fixed":
        return rule.tokens + rule.extra_tokens
    h, w = smart_resize(height, width, rule)
    return h * w // (rule.patch_size * rule.merge_size) ** 2 + rule.extra_tokens


def decode_data_url(url: str, max_bytes: int = MAX_IMAGE_BYTES) -> bytes:
    """The bytes of a base64 `data:image/...` URL; ImageError when it is not one or too big."""
    match = _DATA_URL.match(url)
    if match is None:
        raise ImageError("not a base64 data:image URL")
    payload = url[match.end() :]
    if len(payload) > (max_bytes * 4) // 3 + 4:
        raise ImageError(f"the image is larger than {max_bytes // (1024 * 1024)} MiB")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the data URL is not valid base64") from None


def image_size(data: bytes) -> tuple[int, int]:
    """`(width, height)` from the image header, without decoding the pixels."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
    except Exception as exc:  # Pillow's plug-ins raise many kinds (a decompression bomb…)
        raise ImageError(f"the image cannot be read ({type(exc).__name__})") from None
    if max(width, height) > MAX_IMAGE_SIDE:
        raise ImageError(f"the image is larger than {MAX_IMAGE_SIDE} pixels on a side")
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageError(f"the image has more than {MAX_IMAGE_PIXELS} pixels")
    return width, height


def data_url_tokens(rule: ImageTokenRule, url: str) -> int:
    """Input tokens of the image in a `data:` URL under `rule`."""
    width, height = image_size(decode_data_url(url))
    return image_tokens(rule, width, height)


def smallest_image_tokens(rule: ImageTokenRule) -> int:
    """The fewest tokens one image can cost under `rule` (an image whose size is unknown):
    a resized image is at least one merged patch a side."""
    if rule.kind == "fixed":
        return rule.tokens + rule.extra_tokens
    return 1 + rule.extra_tokens


def largest_image_tokens(rule: ImageTokenRule) -> int:
    """The most tokens one image can cost under `rule` (an image whose size is unknown)."""
    if rule.kind == "fixed":
        return rule.tokens + rule.extra_tokens
    return rule.max_pixels // (rule.patch_size * rule.merge_size) ** 2 + rule.extra_tokens
