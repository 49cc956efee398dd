"""The simulated worker's one token-counting rule, its chat template and its filler text.

Counting rule (shared by ``/tokenize``, ``usage.prompt_tokens`` and the engine's ``n_in``):

1. A chat request is first rendered through a fixed template: for every message
   ``<|{role}|>\\n{content}\\n``, then the generation prompt ``<|assistant|>\\n``. Message content
   given as a list of parts contributes each text part's ``text`` (joined with ``\\n``) and the
   placeholder ``<|image|>`` for every non-text part. A VLM worker then counts each image part
   as its profile's image rule says (``workers/engine/vision.py``) instead of the placeholder.
2. The text is split by the regex ``\\w{1,8}|[^\\w\\s]``: runs of word characters are cut into
   pieces of at most 8 characters, every other non-space character is a token of its own,
   whitespace is free.
3. One BOS token is added in front, as a Llama tokenizer does (``add_special_tokens``).

Token ids are a stable function of the piece (CRC-32 into a 32,000-entry vocabulary; BOS is 1),
so ``/tokenize`` returns the same ids for the same text in every process.

Generated text: output token ``i`` of any request is the filler piece ``FILLER[i % len(FILLER)]``
(a space and one short word), so the text of ``n`` output tokens counts as exactly ``n`` tokens
under the same rule (without BOS).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

BOS_ID = 1
VOCAB_SIZE = 32_000
_PIECE = re.compile(r"\w{1,8}|[^\w\s]")
_WORDS = "lorem ipsum dolor sit amet adipisci elit sed do eiusmod tempor incidunt ut labore et"
FILLER: tuple[str, ...] = tuple(" " + w for w in _WORDS.split(" "))  # each word <= 8 characters


class ChatFormatError(ValueError):
    """A chat ``messages`` value that the template cannot render."""


def count_tokens(text: str, bos: bool = True) -> int:
    """Tokens of a prompt ``text`` under the rule above (with BOS unless ``bos`` is False)."""
    return int(bos) + len(_PIECE.findall(text))


def token_ids(text: str, bos: bool = True) -> list[int]:
    """The token ids of a prompt ``text``; ``len(token_ids(t)) == count_tokens(t)``."""
    ids = [BOS_ID] if bos else []
    ids.extend(2 + zlib.crc32(p.encode()) % (VOCAB_SIZE - 2) for p in _PIECE.findall(text))
    return ids


def token_strs(text: str, bos: bool = True) -> list[str]:
    """The pieces of a prompt ``text`` (``<s>`` for BOS), aligned with :func:`token_ids`."""
    return (["<s>"] if bos else []) + _PIECE.findall(text)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if not isinstance(part, dict):
                raise ChatFormatError("message content parts must be objects")
            if part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            else:
                parts.append(IMAGE_PLACEHOLDER)
        return "\n".join(parts)
    raise ChatFormatError("message content must be a string or a list of parts")


IMAGE_PLACEHOLDER = "<|image|>"
_PLACEHOLDER_TOKENS = len(_PIECE.findall(IMAGE_PLACEHOLDER))


def image_parts(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Every non-text content part of chat ``messages``, in order."""
    parts: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            parts += [p for p in content if isinstance(p, dict) and p.get("type") != "text"]
    return parts


def count_chat_tokens(
    messages: Sequence[Any], image_tokens: Callable[[dict[str, Any]], int] | None = None
) -> int:
    """Tokens of chat ``messages`` rendered through the template; with ``image_tokens`` (a VLM)
    each image part counts as what it returns instead of its placeholder's tokens."""
    n = count_tokens(render_chat(messages))
    if image_tokens is None:
        return n
    return n + sum(image_tokens(p) - _PLACEHOLDER_TOKENS for p in image_parts(messages))


IMAGE_PAD_ID = 0
"""The id each image token gets in `/tokenize`'s list (as a VLM's `<|image_pad|>`)."""


def chat_token_ids(
    messages: Sequence[Any], image_tokens: Callable[[dict[str, Any]], int] | None = None
) -> list[int]:
    """The ids of chat ``messages``; with ``image_tokens`` (a VLM) each image's placeholder is
    replaced by that many ``IMAGE_PAD_ID``, so ``len`` equals :func:`count_chat_tokens`."""
    text = render_chat(messages)
    if image_tokens is None:
        return token_ids(text)
    segments = text.split(IMAGE_PLACEHOLDER)
    ids = token_ids(segments[0])
    for part, segment in zip(image_parts(messages), segments[1:], strict=True):
        ids += [IMAGE_PAD_ID] * image_tokens(part)
        ids += token_ids(segment, bos=False)
    return ids


def render_chat(messages: Sequence[Any]) -> str:
    """Render chat ``messages`` through the fixed template (generation prompt appended)."""
    if not isinstance(messages, list | tuple) or not messages:
        raise ChatFormatError("messages must be a non-empty list")
    out: list[str] = []
    for msg in messages:
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise ChatFormatError("every message must be an object with a string 'role'")
        out.append(f"<|{msg['role']}|>\n{_content_text(msg.get('content'))}\n")
    out.append("<|assistant|>\n")
    return "".join(out)


def filler_pieces(n: int) -> list[str]:
    """The text of output tokens ``0 .. n-1``, one piece per token."""
    k = len(FILLER)
    return [FILLER[i % k] for i in range(n)]


def cut_at_stop(pieces: list[str], stops: Iterable[str]) -> tuple[int, str | None]:
    """Where generation stops on the first matching stop string.

    Returns ``(n_tokens, stop)``: the number of tokens generated up to and including the one that
    completes the earliest stop string (``len(pieces)`` and ``None`` when none matches). The
    text of those tokens is cut before the stop string by :func:`trim_pieces`.
    """
    text = "".join(pieces)
    best: tuple[int, str] | None = None
    for stop in stops:
        if not stop:
            continue
        at = text.find(stop)
        if at >= 0 and (best is None or at + len(stop) < best[0]):
            best = (at + len(stop), stop)
    if best is None:
        return len(pieces), None
    end, stop = best
    pos = 0
    for i, piece in enumerate(pieces):
        pos += len(piece)
        if pos >= end:
            return i + 1, stop
    return len(pieces), stop


def trim_pieces(pieces: list[str], stop: str) -> list[str]:
    """``pieces`` with the text from the first occurrence of ``stop`` onwards removed."""
    cut = "".join(pieces).find(stop)
    if cut < 0:
        return pieces
    out: list[str] = []
    pos = 0
    for piece in pieces:
        keep = max(0, min(len(piece), cut - pos))
        out.append(piece[:keep])
        pos += len(piece)
    return out
