"""Parsing and validating ``/v1/chat/completions`` and ``/v1/completions`` bodies.

Checks run in vLLM 0.32's order and with its wording: unknown model (404), an output budget
larger than the context (400, ``max_tokens=X cannot be greater than max_model_len=N``), a prompt
longer than the context (400, ``This model's maximum context length is N tokens. However, your
prompt contains at least N+1 input tokens ...``), then the sampling checks. Like vLLM, a prompt
that fits but leaves less room than ``max_tokens`` asks for is not an error: ``max_tokens`` is
lowered to ``max_model_len - prompt_tokens``. Sampling knobs (``temperature``, ``top_p``, ...)
are accepted and ignored; ``n`` must be 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from workers.engine.vision import ImageError, ImageTokenRule, data_url_tokens
from workers.sim.errors import (
    SimHTTPError,
    bad_request,
    invalid_field,
    invalid_json,
    unknown_model,
)
from workers.sim.tokens import ChatFormatError, count_chat_tokens, count_tokens

Kind = Literal["chat", "completion"]


@dataclass(slots=True, frozen=True)
class GenerationRequest:
    """A validated generation request, reduced to what the simulated engine needs."""

    kind: Kind
    n_in: int
    max_tokens: int
    min_tokens: int
    exact: bool
    priority: int
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool
    continuous_usage: bool
    request_id: str | None


_INT_FRACTION = "Input should be a valid integer, got a number with a fractional part"
_INT_PARSING = "Input should be a valid integer, unable to parse string as an integer"


def _int(body: dict[str, Any], key: str, default: int | None) -> int | None:
    """An integer field, parsed as leniently as pydantic's lax mode."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise invalid_field(key, "int_from_float", _INT_FRACTION, value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise invalid_field(key, "int_parsing", _INT_PARSING, value) from None
    raise invalid_field(key, "int_type", "Input should be a valid integer", value)


_TRUE = {True, "true", "True", "1", "yes", "on"}
_FALSE = {False, "false", "False", "0", "no", "off"}


def _bool(body: dict[str, Any], key: str) -> bool:
    """A boolean field (pydantic's lax spellings accepted)."""
    value = body.get(key)
    if value is None:
        return False
    if isinstance(value, bool | int | str) and value in _TRUE:
        return True
    if isinstance(value, bool | int | str) and value in _FALSE:
        return False
    raise invalid_field(
        key, "bool_parsing", "Input should be a valid boolean, unable to interpret input", value
    )


def _stops(body: dict[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return tuple(stop)
    raise invalid_field("stop", "string_type", "Input should be a valid string", stop)


def image_counter(rule: ImageTokenRule | None) -> Callable[[dict[str, Any]], int] | None:
    """Tokens of one image part under `rule` (None: a text-only model's placeholder count)."""
    if rule is None:
        return None

    def count(part: dict[str, Any]) -> int:
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str):
            raise ImageError("an image part needs image_url.url")
        if not url.startswith("data:"):
            raise ImageError("the simulated worker reads only data: image URLs")
        return data_url_tokens(rule, url)

    return count


def _prompt_tokens(kind: Kind, body: dict[str, Any], rule: ImageTokenRule | None = None) -> int:
    if kind == "chat":
        messages = body.get("messages")
        try:
            return count_chat_tokens(messages, image_counter(rule))  # type: ignore[arg-type]
        except (ChatFormatError, ImageError) as exc:
            raise invalid_field("messages", "value_error", str(exc), messages) from None
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # one prompt in a batch of one: a string or token ids, as vLLM
    if isinstance(prompt, str):
        return count_tokens(prompt, bos=body.get("add_special_tokens", True) is not False)
    if isinstance(prompt, list) and prompt and all(type(t) is int for t in prompt):
        return len(prompt)
    raise invalid_field(
        "prompt",
        "value_error",
        "prompt must be a string, token ids, or a list of one of either",
        prompt,
    )


def _output_budget(kind: Kind, body: dict[str, Any], max_model_len: int) -> int | None:
    param = "max_tokens"
    requested = _int(body, "max_tokens", None)
    if kind == "chat" and body.get("max_completion_tokens") is not None:
        param = "max_completion_tokens"
        requested = _int(body, param, None)
    if requested is not None and requested > max_model_len:
        raise bad_request(
            f"{param}={requested} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens.",
            param,
            requested,
        )
    return requested


def _check_prompt_fits(n_in: int, max_model_len: int) -> None:
    if n_in > max_model_len:
        raise bad_request(
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"prompt contains at least {max_model_len + 1} input tokens, which exceeds this "
            "limit even without any output tokens. Please reduce the length of the input prompt.",
            "input_tokens",
            max_model_len + 1,
        )


def _sampling_checks(body: dict[str, Any], max_tokens: int, min_tokens: int) -> None:
    if max_tokens < 1:
        raise bad_request(
            f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens
        )
    if min_tokens < 0:
        raise bad_request(f"min_tokens must be greater than or equal to 0, got {min_tokens}.")
    if min_tokens > max_tokens:
        raise bad_request(
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}."
        )
    n = _int(body, "n", 1)
    if n != 1:
        temperature = body.get("temperature")
        if temperature == 0:
            raise bad_request(f"n must be 1 when using greedy sampling, got {n}.")
        raise bad_request(f"The simulated worker serves n=1 only, got {n}.", "n", n)


def _stream_flags(body: dict[str, Any]) -> tuple[bool, bool, bool]:
    stream = _bool(body, "stream")
    options = body.get("stream_options")
    if options and not stream:
        raise bad_request(
            "Stream options can only be defined when `stream=True`.", "stream_options"
        )
    if options is None:
        return stream, False, False
    if not isinstance(options, dict):
        raise invalid_field(
            "stream_options", "model_type", "Input should be a valid dictionary", options
        )
    include = _bool(options, "include_usage")
    return stream, include, include and _bool(options, "continuous_usage_stats")


def load_json_object(raw: bytes) -> dict[str, Any]:
    """Decode a request body that must be a JSON object (400 otherwise)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid_json(raw) from None
    if not isinstance(body, dict):
        raise invalid_field("", "model_attributes_type", "Input should be a valid dictionary", body)
    return body


def check_model(body: dict[str, Any], served_model: str) -> None:
    """404 unless ``model`` is absent/empty or the served model name (vLLM's rule)."""
    model = body.get("model")
    if model and model != served_model:
        raise unknown_model(str(model), served_model)


def parse_generation(
    kind: Kind,
    body: dict[str, Any],
    *,
    served_model: str,
    max_model_len: int,
    request_id: str | None = None,
    priority_header: str | None = None,
    image_rule: ImageTokenRule | None = None,
) -> GenerationRequest:
    """Validate ``body`` for ``kind``; raises :class:`SimHTTPError` exactly where vLLM would.
    ``image_rule``: the served VLM's image-token rule (image parts count by it)."""
    check_model(body, served_model)
    requested = _output_budget(kind, body, max_model_len)
    n_in = _prompt_tokens(kind, body, image_rule)
    _check_prompt_fits(n_in, max_model_len)
    room = max_model_len - n_in
    max_tokens = room if requested is None else min(requested, room)
    min_tokens = _int(body, "min_tokens", 0) or 0
    _sampling_checks(body, max_tokens, min_tokens)
    stream, include_usage, continuous = _stream_flags(body)
    body_id = body.get("request_id")
    priority = _int(body, "priority", 0) or 0
    if priority_header is not None:
        priority = _header_priority(priority_header, priority)
    return GenerationRequest(
        kind=kind,
        n_in=n_in,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        exact=_bool(body, "ignore_eos") or min_tokens == max_tokens,
        priority=priority,
        stop=_stops(body),
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
        request_id=request_id or (body_id if isinstance(body_id, str) else None),
    )


__all__ = [
    "GenerationRequest",
    "Kind",
    "SimHTTPError",
    "check_model",
    "image_counter",
    "load_json_object",
    "parse_generation",
]


def _header_priority(header: str, body_priority: int) -> int:
    """vLLM's `X-Vllm-Priority` header wins over the body when it is a decimal integer; any
    other value is ignored, as before (`"--1"` and `"²"` once passed a digit check and then
    failed `int`, a 500)."""
    text = header.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):
        return body_priority
    return int(text)
