"""Image-token rules (Qwen2-VL's smart resize, fixed per image) and reading image headers."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import pytest
from PIL import Image

from workers.engine.vision import (
    ImageError,
    ImageTokenRule,
    data_url_tokens,
    decode_data_url,
    image_size,
    image_tokens,
    smart_resize,
)

QWEN = ImageTokenRule()  # Qwen2-VL's processor defaults: 14×14 patches merged 2×2


def data_url(width: int, height: int, fmt: str = "PNG") -> str:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buf, format=fmt)
    mime = "jpeg" if fmt == "JPEG" else fmt.lower()
    return f"data:image/{mime};base64,{base64.b64encode(buf.getvalue()).decode()}"


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (448, 448, 256 + 2),  # the profile's example: one token per 28×28 area
        (1024, 768, 37 * 27 + 2),  # rounded to multiples of 28: 1036 × 756
        (10, 10, 4 + 2),  # below min_pixels: scaled up to 56 × 56
        (8000, 6000, 147 * 110 + 2),  # above max_pixels: scaled down to 4116 × 3080
    ],
)
def test_qwen2_vl_counts_one_token_per_merged_patch(width: int, height: int, tokens: int) -> None:
    assert image_tokens(QWEN, width, height) == tokens


def test_the_resized_area_stays_within_the_pixel_bounds_and_keeps_the_shape() -> None:
    for width, height in [(3, 500), (640, 480), (4000, 3000), (20_000, 150)]:
        h, w = smart_resize(height, width, QWEN)
        assert h % 28 == 0 and w % 28 == 0
        assert QWEN.min_pixels <= h * w <= QWEN.max_pixels
        if min(width, height) >= 28:  # a side under one patch is padded to one: shape lost
            assert abs(w / h - width / height) / (width / height) < 0.1
    tight = ImageTokenRule(min_pixels=256 * 28 * 28, max_pixels=1280 * 28 * 28)
    assert image_tokens(tight, 64, 64) >= 256 + 2 and image_tokens(tight, 4000, 4000) <= 1282


def test_refusals_and_the_fixed_rule() -> None:
    with pytest.raises(ImageError, match="aspect ratio"):
        image_tokens(QWEN, 20_100, 100)
    llava = ImageTokenRule(kind="fixed", tokens=576, extra_tokens=0)
    assert image_tokens(llava, 10, 10) == image_tokens(llava, 4000, 3000) == 576


def test_data_urls_are_measured_from_the_header() -> None:
    assert image_size(decode_data_url(data_url(448, 448))) == (448, 448)
    assert data_url_tokens(QWEN, data_url(640, 480, "JPEG")) == image_tokens(QWEN, 640, 480)
    for bad, why in [
        ("https://example.com/cat.png", "not a base64 data:image URL"),
        ("data:text/plain;base64,aGk=", "not a base64 data:image URL"),
        ("data:image/png;base64,@@@", "not valid base64"),
        ("data:image/png;base64," + base64.b64encode(b"not an image").decode(), "cannot be read"),
    ]:
        with pytest.raises(ImageError, match=why):
            data_url_tokens(QWEN, bad)
    with pytest.raises(ImageError, match="larger than"):
        decode_data_url(data_url(448, 448), max_bytes=100)


def test_a_header_claiming_a_decompression_bomb_is_an_image_error() -> None:
    """Pillow raises its own `DecompressionBombError` (neither OSError nor ValueError) for a
    header over its pixel limit; before, it escaped as a 500 at the gateway and the worker."""
    header = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAANrAAADawCAIAAAAruWI+AAAAAElFTkSuQmCC")
    with pytest.raises(ImageError, match="DecompressionBombError"):
        image_size(header)


def png_header(width: int, height: int) -> bytes:
    """A PNG's signature, header chunk and end chunk: its size, without pixels."""
    chunk = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    head = struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    end = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    return b"\x89PNG\r\n\x1a\n" + head + end


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # as served
def test_an_image_past_pillow_s_pixel_warning_is_refused() -> None:
    """Under the side limit and under Pillow's own refusal (twice its warning line, where it
    only warns: the suite makes warnings errors, a server does not), a 16,384 × 10,900 image
    passed: one colour is ~700 KB as base64 and decodes to ~535 MB."""
    assert image_size(png_header(9000, 9000)) == (9000, 9000)
    with pytest.raises(ImageError, match="more than 89478485 pixels"):
        image_size(png_header(16_384, 10_900))
