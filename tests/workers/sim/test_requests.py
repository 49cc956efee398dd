"""Request parsing of the simulated worker where it once differed from vLLM: a batch of one
token-id prompt, and a priority header that is not an integer."""

from __future__ import annotations

import pytest

from workers.sim.requests import parse_generation


def parse(body: dict[str, object], priority_header: str | None = None) -> object:
    return parse_generation(
        "completion",
        {"model": "tiny-llama", "max_tokens": 4, **body},
        served_model="tiny-llama",
        max_model_len=2048,
        priority_header=priority_header,
    )


def test_a_batch_of_one_token_id_prompt_is_read_as_vllm_reads_it() -> None:
    assert parse({"prompt": [[1, 2, 3]]}).n_in == 3  # type: ignore[attr-defined]
    assert parse({"prompt": [1, 2, 3]}).n_in == 3  # type: ignore[attr-defined]


@pytest.mark.parametrize(("header", "priority"), [("-3", -3), (" 7 ", 7), ("+2", 2)])
def test_an_integer_priority_header_wins_over_the_body(header: str, priority: int) -> None:
    assert parse({"prompt": "hi", "priority": 1}, header).priority == priority  # type: ignore[attr-defined]


@pytest.mark.parametrize("header", ["--1", "²", "abc", "", "-"])
def test_a_priority_header_that_is_not_an_integer_is_ignored(header: str) -> None:
    assert parse({"prompt": "hi", "priority": 1}, header).priority == 1  # type: ignore[attr-defined]
