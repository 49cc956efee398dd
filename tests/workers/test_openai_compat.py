"""One OpenAI-compatibility suite, run against the simulated worker and the real vLLM server.

Every assertion holds for both kinds (the real one is a tiny random-weight Llama, so texts are
garbage and only shapes, counts and errors are compared): the official ``openai`` client gets
chat and completion answers, streamed and not, with ``usage`` matching ``/tokenize`` and the
tokens streamed; ``continuous_usage_stats`` puts usage on every chunk; ``ignore_eos`` and
``min_tokens == max_tokens`` give exact lengths; bad input gets vLLM's errors; ``/metrics``
carries the ``vllm:*`` names the scheduler reads.

One chunk normally carries one token, but a busy real vLLM merges the outputs its API server
has not sent yet into one chunk, so token counts are checked through ``continuous_usage_stats``
and chunk counts only bounded (the simulated worker's one-chunk-per-step rule is tested in
``tests/workers/sim``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.workers.conftest import CompatWorker
from tests.workers.sim.process import samples

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Name three prime numbers, please."},
]
PROMPT = "The quick brown fox jumps over the lazy dog, and then"
EXACT = {"ignore_eos": True}

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def client(compat_worker: CompatWorker) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=compat_worker.base_url, api_key="unused", max_retries=0) as c:
        yield c


@pytest.fixture(scope="module")
def max_model_len(compat_worker: CompatWorker) -> int:
    card = httpx.get(f"{compat_worker.base_url}/models", timeout=30).json()["data"][0]
    return int(card["max_model_len"])


def tokenize(worker: CompatWorker, **body: Any) -> int:
    resp = httpx.post(f"{worker.root}/tokenize", json={"model": worker.model, **body}, timeout=60)
    assert resp.status_code == 200, resp.text
    data = resp.json()
    assert data["count"] == len(data["tokens"])
    return int(data["count"])


def test_health_and_models(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    assert httpx.get(f"{compat_worker.root}/health", timeout=30).status_code == 200
    models = client.models.list()
    assert [m.id for m in models.data] == [compat_worker.model]
    card = httpx.get(f"{compat_worker.base_url}/models", timeout=30).json()["data"][0]
    assert card["object"] == "model" and card["owned_by"] == "vllm"
    assert isinstance(card["max_model_len"], int) and card["max_model_len"] > 0


def test_tokenize_shape(compat_worker: CompatWorker, max_model_len: int) -> None:
    resp = httpx.post(f"{compat_worker.root}/tokenize", json={"prompt": PROMPT}, timeout=60)
    data = resp.json()
    assert set(data) >= {"count", "max_model_len", "tokens"}
    assert data["max_model_len"] == max_model_len
    assert data["count"] == len(data["tokens"]) > 0
    assert tokenize(compat_worker, messages=MESSAGES) > tokenize(compat_worker, prompt="Hi")


def test_chat_answer_and_usage(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(
        model=compat_worker.model, messages=MESSAGES, max_tokens=8, extra_body=EXACT
    )
    assert resp.object == "chat.completion" and resp.model == compat_worker.model
    choice = resp.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason == "length"
    assert resp.usage is not None
    assert resp.usage.completion_tokens == 8
    assert resp.usage.prompt_tokens == tokenize(compat_worker, messages=MESSAGES)
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 8


def test_completion_answer_and_usage(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    resp = client.completions.create(
        model=compat_worker.model, prompt=PROMPT, max_tokens=6, extra_body=EXACT
    )
    assert resp.object == "text_completion"
    assert resp.choices[0].finish_reason == "length" and isinstance(resp.choices[0].text, str)
    assert resp.usage is not None
    assert resp.usage.completion_tokens == 6
    assert resp.usage.prompt_tokens == tokenize(compat_worker, prompt=PROMPT)


def test_chat_stream_with_usage(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model=compat_worker.model,
            messages=MESSAGES,
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=EXACT,
        )
    )
    with_choices = [c for c in chunks if c.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    token_chunks = with_choices[1:]
    assert 1 <= len(token_chunks) <= 12
    assert all(c.usage is None for c in with_choices)
    assert [c.choices[0].finish_reason for c in token_chunks][-1] == "length"
    assert all(c.choices[0].finish_reason is None for c in token_chunks[:-1])
    assert len({c.id for c in chunks}) == 1
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == 12
    assert last.usage.prompt_tokens == tokenize(compat_worker, messages=MESSAGES)
    assert last.usage.total_tokens == last.usage.prompt_tokens + 12


def test_completion_stream_with_usage(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(
            model=compat_worker.model,
            prompt=PROMPT,
            max_tokens=10,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=EXACT,
        )
    )
    token_chunks = [c for c in chunks if c.choices]
    assert 1 <= len(token_chunks) <= 10
    assert token_chunks[-1].choices[0].finish_reason == "length"
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage is not None
    assert usage.completion_tokens == 10
    assert usage.prompt_tokens == tokenize(compat_worker, prompt=PROMPT)


def test_stream_without_usage_has_no_usage_chunk(
    compat_worker: CompatWorker, client: openai.OpenAI
) -> None:
    chunks = list(
        client.completions.create(
            model=compat_worker.model, prompt=PROMPT, max_tokens=4, stream=True, extra_body=EXACT
        )
    )
    assert 1 <= len(chunks) <= 4
    assert all(c.usage is None and c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"


def test_continuous_usage_stats(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=compat_worker.model,
        messages=MESSAGES,
        max_tokens=7,
        stream=True,
        extra_body={
            **EXACT,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        },
    )
    chunks = list(stream)
    n_in = tokenize(compat_worker, messages=MESSAGES)
    assert all(c.usage is not None for c in chunks)
    counts = [c.usage.completion_tokens for c in chunks if c.usage is not None and c.choices]
    assert counts[0] == 0 and counts[-1] == 7  # the role chunk, then the tokens so far
    assert all(a < b for a, b in itertools.pairwise(counts))
    assert all(c.usage is not None and c.usage.prompt_tokens == n_in for c in chunks)
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 7


def test_continuous_usage_stats_completions(
    compat_worker: CompatWorker, client: openai.OpenAI
) -> None:
    stream = client.completions.create(
        model=compat_worker.model,
        prompt=PROMPT,
        max_tokens=5,
        stream=True,
        extra_body={
            **EXACT,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        },
    )
    counts = [c.usage.completion_tokens for c in stream if c.usage is not None and c.choices]
    assert counts[-1] == 5 and all(a < b for a, b in itertools.pairwise([0, *counts]))


@pytest.mark.parametrize("n", [1, 5, 23])
def test_exact_lengths(compat_worker: CompatWorker, client: openai.OpenAI, n: int) -> None:
    by_flag = client.completions.create(
        model=compat_worker.model, prompt=PROMPT, max_tokens=n, extra_body=EXACT
    )
    by_min = client.chat.completions.create(
        model=compat_worker.model, messages=MESSAGES, max_tokens=n, extra_body={"min_tokens": n}
    )
    assert by_flag.usage is not None and by_flag.usage.completion_tokens == n
    assert by_min.usage is not None and by_min.usage.completion_tokens == n


def test_free_length_within_bounds(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    resp = client.completions.create(
        model=compat_worker.model, prompt=PROMPT, max_tokens=16, extra_body={"min_tokens": 2}
    )
    assert resp.usage is not None and 2 <= resp.usage.completion_tokens <= 16
    reason = resp.choices[0].finish_reason
    assert reason == ("length" if resp.usage.completion_tokens == 16 else "stop")


def _error(exc: openai.APIStatusError) -> dict[str, Any]:
    body = exc.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) >= {"message", "type", "param", "code"}
    assert body["error"]["code"] == exc.status_code
    return dict(body["error"])


def test_unknown_model_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model", messages=MESSAGES, max_tokens=2)
    err = _error(info.value)
    assert "no-such-model" in err["message"] and err["type"] == "NotFoundError"


def test_n_above_one_is_400(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=compat_worker.model, messages=MESSAGES, max_tokens=2, n=2, temperature=0
        )
    assert "n" in _error(info.value)["message"]


def test_prompt_over_context_is_400(
    compat_worker: CompatWorker, client: openai.OpenAI, max_model_len: int
) -> None:
    prompt = "hello world " * max_model_len
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=compat_worker.model, prompt=prompt, max_tokens=4)
    message = _error(info.value)["message"]
    assert f"maximum context length is {max_model_len} tokens" in message


def test_max_tokens_over_context_is_400(
    compat_worker: CompatWorker, client: openai.OpenAI, max_model_len: int
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=compat_worker.model, messages=MESSAGES, max_tokens=max_model_len + 1
        )
    assert str(max_model_len) in _error(info.value)["message"]


def test_malformed_json_is_400(compat_worker: CompatWorker) -> None:
    resp = httpx.post(
        f"{compat_worker.base_url}/chat/completions",
        content=b'{"model": "x", "messages": [',
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["code"] == 400


METRICS = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:num_preemptions_total": "counter",
    "vllm:prompt_tokens_total": "counter",
    "vllm:generation_tokens_total": "counter",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
}


def test_metrics_names(compat_worker: CompatWorker, client: openai.OpenAI) -> None:
    client.completions.create(
        model=compat_worker.model, prompt=PROMPT, max_tokens=3, extra_body=EXACT
    )
    text = httpx.get(f"{compat_worker.root}/metrics", timeout=30).text
    for name, kind in METRICS.items():
        series = name + "_count" if kind == "histogram" else name
        found = samples(text, series)
        assert found, f"{series} missing from /metrics"
        assert any(labels.get("model_name") == compat_worker.model for labels, _ in found)
    for _, value in samples(text, "vllm:kv_cache_usage_perc"):
        assert 0.0 <= value <= 1.0
    assert sum(v for _, v in samples(text, "vllm:generation_tokens_total")) >= 3
    info = samples(text, "vllm:cache_config_info")
    assert info and int(info[0][0]["num_gpu_blocks"]) > 0 and int(info[0][0]["block_size"]) > 0
