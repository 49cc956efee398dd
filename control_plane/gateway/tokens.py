"""Prompt-size estimate used for scheduling before the worker reports exact usage.

Rule: one token per 4 UTF-8 characters of text (rounded up), plus 4 tokens of chat-template
overhead per message. An image part counts as its model's image-token rule says
(`workers/engine/vision.py`, sizes read from the image header) when the model registry gives
the model one, else 8 tokens. Image URLs must be `data:` URLs, or `http(s)` URLs on a host the
operator allows (`ARBITER_IMAGE_HOSTS`; counted as the rule's largest image, since the gateway
does not fetch them); a `data:` image is read (its header) whether or not the model has a rule.
An `http(s)` URL must be printable ASCII without a backslash or user info, with a valid port:
fetchers disagree on the host of `http://evil\\@allowed/` (urllib3 and requests fetch `evil`),
so such a URL is refused rather than judged by one parser. Anything else — another scheme
or host, an image that cannot be read or is too large — is a 400 naming the part, as is a
part of another type or carrying another media key (audio, video, embeddings: nothing here
serves them, and vLLM would fetch their URLs; it reads a part with a `uuid` by its keys).
Text parts are `text`, `input_text`, `output_text`, `refusal` and `thinking`, as vLLM reads
them. Token-id prompts count exactly. The estimate orders and prices the queue and is what
the scheduler charges for the input; the request's SQL row records the worker's
`usage.prompt_tokens`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

from control_plane.gateway.bounds import INT32_MAX
from control_plane.gateway.errors import ApiError
from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest
from workers.engine.vision import (
    ImageError,
    ImageTokenRule,
    decode_data_url,
    image_size,
    image_tokens,
    largest_image_tokens,
    smallest_image_tokens,
)

_CHARS_PER_TOKEN = 4
_MESSAGE_OVERHEAD = 4
_IMAGE_PART = 8
TEXT_PARTS = {
    "text": "text",
    "input_text": "text",
    "output_text": "text",
    "refusal": "refusal",
    "thinking": "thinking",
}
"""The part types vLLM reads as text, and the field holding the text."""
_PLAIN_URL = re.compile(r"[!-\[\]-~]+")
"""Printable ASCII but the backslash: no space, control or look-alike character for two URL
parsers to read differently."""
MEDIA_KEYS = frozenset(
    {"image_url", "audio_url", "video_url", "input_audio", "image_embeds", "image_pil",
     "audio_embeds", "video", "audio"}
)  # fmt: skip
"""Keys vLLM reads media from (a part with a `uuid` is parsed by its keys, not its type)."""
IMAGE_PARTS = frozenset({"image_url", "input_image"})
"""The image part types vLLM reads (`input_image` carries its URL as a plain string); both
pass the same checks, so neither fetches a host the operator did not allow."""


def text_tokens(text: str) -> int:
    """Estimated tokens of `text`: one per 4 characters, rounded up."""
    return -(-len(text) // _CHARS_PER_TOKEN)


class ImageCounter:
    """Counts image parts for one model: by its rule, after checking where each comes from."""

    def __init__(self, rule: ImageTokenRule | None, hosts: Collection[str]) -> None:
        self.rule = rule
        self.hosts = frozenset(h.lower() for h in hosts)
        self.sure = 0
        """Tokens the images counted so far surely cost under the rule (a `data:` image
        exactly, a remote one at the rule's smallest): the prompt is at least this long."""

    def __call__(self, part: dict[str, Any], param: str) -> int:
        media = MEDIA_KEYS.intersection(part) - {"image_url"}
        if part.get("type") not in IMAGE_PARTS or media:  # vLLM would fetch audio or video
            raise ApiError(
                400,
                f"Unsupported content part type {str(part.get('type'))[:40]!r}: this "
                "deployment accepts text, image_url and input_image parts.",
                param=f"{param}.type",
                code="invalid_content_part",
            )
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        param = f"{param}.image_url"
        if not isinstance(url, str) or not url:
            raise _bad(param, "An image_url part needs image_url.url.")
        if url.startswith("data:"):
            try:  # read even without a rule: vLLM would decode what Pillow refuses here
                width, height = image_size(decode_data_url(url))
                if self.rule is None:
                    return _IMAGE_PART
                tokens = image_tokens(self.rule, width, height)
            except ImageError as exc:
                raise _bad(param, f"Invalid image: {exc}.") from None
            self.sure += tokens
            return tokens
        if _remote_host(url) not in self.hosts:
            raise _bad(
                param,
                "Image URLs must be data: URLs (base64); this deployment fetches no remote "
                "image unless its operator allows the host (ARBITER_IMAGE_HOSTS), named in a "
                "plain http(s) URL (printable ASCII, no backslash, no user info, a valid port).",
            )
        if self.rule is None:
            return _IMAGE_PART
        self.sure += smallest_image_tokens(self.rule)
        return largest_image_tokens(self.rule)


def _remote_host(url: str) -> str | None:
    """The host of a plain `http(s)` URL every parser reads alike; None for any other URL
    (another scheme, user info, a backslash, a space or non-ASCII character, a malformed
    authority or port, which `urlsplit` raises on)."""
    if _PLAIN_URL.fullmatch(url) is None:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is not a number in 0..65535)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or "@" in parts.netloc:
        return None
    return parts.hostname or None


def _bad(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_image")


def _content_tokens(
    content: str | list[dict[str, Any]] | None, images: ImageCounter, param: str
) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return text_tokens(content)
    total = 0
    for j, part in enumerate(content):
        kind = part.get("type")
        if kind in TEXT_PARTS and not MEDIA_KEYS.intersection(part):
            total += text_tokens(str(part.get(TEXT_PARTS[kind]) or ""))
        else:  # an image (checked), or refused: vLLM would read a media key whatever the type
            total += images(part, f"{param}[{j}]")
    return total


def estimate_prompt_tokens(
    body: ChatCompletionRequest | CompletionRequest,
    image_rule: ImageTokenRule | None = None,
    image_hosts: Collection[str] = (),
) -> int:
    """Estimated prompt tokens of a validated request (never below 1); ApiError (400) for an
    image part that cannot be counted (see the module docstring)."""
    return estimate_prompt(body, image_rule, image_hosts)[0]


def estimate_prompt(
    body: ChatCompletionRequest | CompletionRequest,
    image_rule: ImageTokenRule | None = None,
    image_hosts: Collection[str] = (),
) -> tuple[int, int]:
    """`estimate_prompt_tokens`, and the tokens the request's images surely cost (0 without
    images or a rule): a prompt whose images alone fill the context is refused at the door
    (`door.check_context`). An estimate past a 32-bit count (many remote images, each
    counted at the largest) is a 400 naming `messages`: it could be neither stored nor
    served."""
    if isinstance(body, ChatCompletionRequest):
        images = ImageCounter(image_rule, image_hosts)
        n = sum(
            _content_tokens(m.content, images, f"messages[{i}].content") + _MESSAGE_OVERHEAD
            for i, m in enumerate(body.messages)
        )
        if n > INT32_MAX:
            raise ApiError(
                400,
                f"The prompt is estimated at {n} tokens, more than any model reads; send "
                "fewer images.",
                param="messages",
                code="context_length_exceeded",
            )
        return max(1, n), images.sure
    prompt = body.prompt
    if isinstance(prompt, str):
        return max(1, text_tokens(prompt)), 0
    first = prompt[0]
    if isinstance(first, int):
        return len(prompt), 0
    if isinstance(first, list):
        return max(1, len(first)), 0
    return max(1, text_tokens(str(first))), 0
