"""The one token-counting rule, the chat template and the filler text."""

from __future__ import annotations

from workers.sim.tokens import (
    FILLER,
    count_tokens,
    cut_at_stop,
    filler_pieces,
    render_chat,
    token_ids,
    token_strs,
    trim_pieces,
)


def test_counting_rule_words_punctuation_and_bos() -> None:
    assert count_tokens("Hello, world!") == 1 + 4
    assert count_tokens("Hello, world!", bos=False) == 4
    assert count_tokens("") == 1
    assert count_tokens("abcdefghijkl") == 1 + 2  # words are cut into pieces of 8 characters
    assert token_strs("abcdefghijkl") == ["<s>", "abcdefgh", "ijkl"]


def test_ids_align_with_the_count_and_are_stable() -> None:
    text = "Ünïcode wörds, numbers 12345 and symbols #@!"
    ids = token_ids(text)
    assert len(ids) == count_tokens(text) == len(token_strs(text))
    assert ids[0] == 1 and all(1 < i < 32_000 for i in ids[1:])
    assert ids == token_ids(text)


def test_chat_template() -> None:
    rendered = render_chat(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url"}]},
        ]
    )
    assert rendered == "<|system|>\nBe brief.\n<|user|>\nHi\n<|image|>\n<|assistant|>\n"


def test_each_filler_piece_is_one_token() -> None:
    for n in (1, 2, len(FILLER), 3 * len(FILLER) + 1):
        pieces = filler_pieces(n)
        assert len(pieces) == n
        assert count_tokens("".join(pieces), bos=False) == n


def test_stop_string_cut() -> None:
    pieces = [" lorem", " ipsum", " dolor", " sit"]
    assert cut_at_stop(pieces, ["dolor"]) == (3, "dolor")
    assert cut_at_stop(pieces, ["sum do", "sit"]) == (3, "sum do")
    assert cut_at_stop(pieces, ["nothing"]) == (4, None)
    assert trim_pieces(pieces[:3], "sum do") == [" lorem", " ip", "", ""][:3]
    assert "".join(trim_pieces(pieces[:3], "dolor")) == " lorem ipsum "
