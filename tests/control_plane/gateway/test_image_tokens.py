"""Image parts at the door: counted by the model's rule from the header, refused with a 400
naming the part when they cannot be counted or come from a host nobody allowed."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.gateway.errors import ApiError
from control_plane.gateway.schemas import ChatCompletionRequest
from control_plane.gateway.tokens import estimate_prompt_tokens
from tests.workers.engine.test_vision import data_url
from workers.engine.vision import ImageTokenRule, image_tokens, largest_image_tokens

QWEN = ImageTokenRule()
TEXT = "Describe the pictures."


def chat(*images: str) -> ChatCompletionRequest:
    parts: list[dict[str, Any]] = [{"type": "text", "text": TEXT}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in images]
    return ChatCompletionRequest.model_validate(
        {"model": "vl", "messages": [{"role": "user", "content": parts}]}
    )


def test_each_image_counts_by_the_model_rule() -> None:
    text_only = estimate_prompt_tokens(chat())
    body = chat(data_url(448, 448), data_url(1024, 768), data_url(10, 10))
    expected = sum(image_tokens(QWEN, w, h) for w, h in [(448, 448), (1024, 768), (10, 10)])
    assert estimate_prompt_tokens(body, QWEN) == text_only + expected == text_only + 1265


def test_without_a_rule_an_image_is_eight_tokens_as_before() -> None:
    assert estimate_prompt_tokens(chat(data_url(448, 448))) == estimate_prompt_tokens(chat()) + 8


def test_remote_images_only_from_allowed_hosts_counted_at_the_largest() -> None:
    url = "https://images.example.com/cat.png"
    with pytest.raises(ApiError) as err:
        estimate_prompt_tokens(chat(url), QWEN)
    assert err.value.status == 400 and err.value.param == "messages[0].content[1].image_url"
    assert "data: URLs" in err.value.message
    allowed = estimate_prompt_tokens(chat(url), QWEN, ["images.example.com"])
    assert allowed == estimate_prompt_tokens(chat()) + largest_image_tokens(QWEN)
    for bad in ("file:///etc/passwd", "ftp://images.example.com/a.png"):
        with pytest.raises(ApiError):
            estimate_prompt_tokens(chat(bad), QWEN, ["images.example.com"])


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("data:image/png;base64,AAAA", "cannot be read"),
        ("data:image/png;base64,***", "not valid base64"),
        ("data:application/pdf;base64,AAAA", "not a base64 data:image URL"),
    ],
)
def test_an_unreadable_image_is_a_400_naming_the_part(url: str, why: str) -> None:
    body = chat(data_url(64, 64), url)
    with pytest.raises(ApiError, match=why) as err:
        estimate_prompt_tokens(body, QWEN)
    assert err.value.param == "messages[0].content[2].image_url"
    assert err.value.code == "invalid_image"


def test_a_part_without_a_url_is_refused() -> None:
    body = ChatCompletionRequest.model_validate(
        {"model": "vl", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}
    )
    with pytest.raises(ApiError, match=r"image_url\.url"):
        estimate_prompt_tokens(body, QWEN)


BOMB = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAANrAAADawCAIAAAAruWI+AAAAAElFTkSuQmCC"
"""A PNG header claiming 14000 × 14000 pixels: Pillow refuses it as a decompression bomb."""


def test_an_image_whose_header_claims_a_huge_size_is_a_400_not_a_500() -> None:
    with pytest.raises(ApiError, match="cannot be read") as err:
        estimate_prompt_tokens(chat(BOMB), QWEN)
    assert err.value.status == 400 and err.value.code == "invalid_image"


def parts(*content: dict[str, Any]) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate(
        {"model": "vl", "messages": [{"role": "user", "content": list(content)}]}
    )


def test_an_input_image_part_passes_the_same_checks_as_image_url() -> None:
    """vLLM reads `input_image` (its URL a plain string) as it reads `image_url`; before, the
    gateway counted it as 8 tokens and let any URL through to the worker."""
    metadata = {"type": "input_image", "image_url": "http://169.254.169.254/x.png"}
    with pytest.raises(ApiError, match="data: URLs") as err:
        estimate_prompt_tokens(parts(metadata), QWEN)
    assert err.value.param == "messages[0].content[0].image_url"
    with pytest.raises(ApiError, match="cannot be read"):
        estimate_prompt_tokens(parts({"type": "input_image", "image_url": BOMB}), QWEN)
    counted = estimate_prompt_tokens(
        parts({"type": "input_image", "image_url": data_url(448, 448)}), QWEN
    )
    assert counted == estimate_prompt_tokens(parts()) + image_tokens(QWEN, 448, 448)


@pytest.mark.parametrize("kind", ["audio_url", "video_url", "image_embeds", "input_audio", None])
def test_a_part_of_another_type_is_a_400_naming_its_type(kind: str | None) -> None:
    with pytest.raises(ApiError, match="Unsupported content part type") as err:
        estimate_prompt_tokens(parts({"type": kind, "audio_url": {"url": "http://x/a.wav"}}))
    assert err.value.status == 400 and err.value.param == "messages[0].content[0].type"


def test_every_part_type_vllm_reads_as_text_counts_as_text() -> None:
    """An SDK replaying an assistant's refusal, a Responses-style `input_text`: text, as vLLM
    reads them (the first version of the part check refused them)."""
    for part in (
        {"type": "refusal", "refusal": "x" * 40},
        {"type": "input_text", "text": "x" * 40},
        {"type": "output_text", "text": "x" * 40},
        {"type": "thinking", "thinking": "x" * 40},
    ):
        assert estimate_prompt_tokens(parts(part)) == estimate_prompt_tokens(parts()) + 10


def test_a_media_key_on_another_part_type_is_checked_or_refused() -> None:
    """vLLM reads a part with a `uuid` by its keys: a `text` part carrying an `image_url` would
    have it fetched, past the host allow-list."""
    sneaky = {"type": "text", "text": "x", "uuid": "u", "image_url": {"url": "http://10.0.0.1/a"}}
    with pytest.raises(ApiError) as err:
        estimate_prompt_tokens(parts(sneaky), QWEN)
    assert err.value.status == 400
    audio = {"type": "image_url", "image_url": {"url": data_url(8, 8)}, "audio_url": {"url": "x"}}
    with pytest.raises(ApiError, match="Unsupported"):
        estimate_prompt_tokens(parts(audio), QWEN)


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png;base64,***",  # not base64
        "data:text/html;base64,PGI+",  # not an image
        BOMB,  # Pillow refuses it: vLLM would decode it
    ],
)
def test_without_a_rule_a_data_image_is_still_read(url: str) -> None:
    """A model the registry gives no image rule (a vLLM registered by URL alone) counts an
    image as 8 tokens; before, its data: URL went to the worker unread."""
    with pytest.raises(ApiError) as err:
        estimate_prompt_tokens(chat(url))
    assert err.value.code == "invalid_image"
    assert err.value.param == "messages[0].content[1].image_url"


ALLOWED = ["img.example.com"]


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1/x.png",  # urlsplit raises ValueError: was a 500
        "http://img.example.com]/x.png",
        "http://a\uff03@img.example.com/x.png",  # invalid under NFKC: ValueError too
        "http://img.example.com:99999/x.png",  # .port raises
        "http://evil\\@img.example.com/x.png",  # urllib3 and requests fetch http://evil/
        "http://evil@img.example.com/x.png",
        " http://img.example.com/x.png",
        "http://img.example.com\t/x.png",
        "http://img.example.com./x.png",
        "http://bücher.example.com/x.png",
    ],
)
def test_an_ambiguous_or_malformed_remote_url_is_a_400(url: str) -> None:
    with pytest.raises(ApiError, match="plain http") as err:
        estimate_prompt_tokens(chat(url), QWEN, ALLOWED)
    assert err.value.status == 400 and err.value.code == "invalid_image"
    assert err.value.param == "messages[0].content[1].image_url"


def test_an_allowed_host_is_read_in_any_case_and_on_any_port() -> None:
    largest = estimate_prompt_tokens(chat()) + largest_image_tokens(QWEN)
    for url in ("HTTPS://IMG.example.COM/x.png", "http://img.example.com:8080/x.png?a=b#c"):
        assert estimate_prompt_tokens(chat(url), QWEN, ALLOWED) == largest
