"""Streaming load against any vLLM-compatible server, timing each request's tokens.

Every request is a streamed `/v1/completions` call whose prompt is a list of token ids (so the
prompt length is exact on every server, whatever its tokenizer) drawn at random, so no two
requests share a prefix and prefix caching never shortens a prefill. `ignore_eos` with
`max_tokens` fixes the output length; `continuous_usage_stats` tells how many tokens each chunk
carries. TTFT runs from sending the request to the chunk that holds the first token; TPOT is
`(t_last - t_first) / (n - 1)`, which stays right when a server coalesces tokens into one chunk.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from dataclasses import dataclass

import httpx

PROMPT_ID_RANGE = (100, 4000)  # inside the tiny model's vocabulary, clear of special tokens


@dataclass(frozen=True)
class RequestTiming:
    """One request: seconds to the first token and per later token, and tokens received.

    `arrivals` holds `(perf_counter time, output tokens so far)` for every chunk that brought
    tokens, so callers can restrict TPOT to a window (e.g. while every stream is decoding).
    """

    ttft_s: float
    tpot_s: float
    completion_tokens: int
    prompt_tokens: int
    arrivals: tuple[tuple[float, int], ...]


@dataclass(frozen=True)
class LoadSpec:
    """`concurrency` streams, each sending `requests_per_stream` requests back to back."""

    concurrency: int
    requests_per_stream: int
    prompt_tokens: int
    output_tokens: int
    seed: int = 0


def mean_ttft(timings: list[RequestTiming]) -> float:
    """Mean time to first token (s)."""
    return statistics.fmean(t.ttft_s for t in timings)


def mean_tpot(timings: list[RequestTiming]) -> float:
    """Mean time per output token after the first (s)."""
    return statistics.fmean(t.tpot_s for t in timings)


async def timed_completion(
    client: httpx.AsyncClient, root: str, model: str, prompt: list[int], max_tokens: int
) -> RequestTiming:
    """Send one streamed completion and time its tokens; raises if fewer tokens come back."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    start = time.perf_counter()
    arrivals: list[tuple[float, int]] = []  # (time, completion tokens so far)
    prompt_tokens = 0
    async with client.stream("POST", f"{root}/v1/completions", json=body) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"{root}: HTTP {resp.status_code}: {(await resp.aread())[:300]!r}")
        async for line in resp.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            usage = json.loads(line[6:]).get("usage") or {}
            done = int(usage.get("completion_tokens") or 0)
            prompt_tokens = int(usage.get("prompt_tokens") or prompt_tokens)
            if done and (not arrivals or done > arrivals[-1][1]):
                arrivals.append((time.perf_counter(), done))
    return _timing(start, arrivals, prompt_tokens, max_tokens)


def _timing(
    start: float, arrivals: list[tuple[float, int]], prompt_tokens: int, expected: int
) -> RequestTiming:
    if not arrivals or arrivals[-1][1] != expected:
        got = arrivals[-1][1] if arrivals else 0
        raise RuntimeError(f"expected {expected} output tokens, got {got}")
    (t_first, _), (t_last, n) = arrivals[0], arrivals[-1]
    tpot = (t_last - t_first) / (n - 1) if n > 1 else 0.0
    return RequestTiming(t_first - start, tpot, n, prompt_tokens, tuple(arrivals))


async def run_load(root: str, model: str, spec: LoadSpec) -> list[RequestTiming]:
    """Run `spec` against the server at `root`; every request's timing, in completion order."""
    rng = random.Random(spec.seed)
    prompts = [
        [rng.randrange(*PROMPT_ID_RANGE) for _ in range(spec.prompt_tokens)]
        for _ in range(spec.concurrency * spec.requests_per_stream)
    ]
    limits = httpx.Limits(max_connections=spec.concurrency + 4)
    timings: list[RequestTiming] = []
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def stream(i: int) -> None:
            for k in range(spec.requests_per_stream):
                prompt = prompts[i * spec.requests_per_stream + k]
                timing = await timed_completion(client, root, model, prompt, spec.output_tokens)
                timings.append(timing)

        await asyncio.gather(*(stream(i) for i in range(spec.concurrency)))
    return timings


def load(root: str, model: str, spec: LoadSpec) -> list[RequestTiming]:
    """Blocking wrapper of `run_load`."""
    return asyncio.run(run_load(root, model, spec))
