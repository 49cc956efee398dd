"""Measuring a server's prefill and decode step times (for profile fits) and its own histograms.

- Prefill: lone requests (one at a time) with prompts of several lengths and one output token.
  The server's own TTFT (`vllm:time_to_first_token_seconds`, from the request's arrival in the
  API server to its first token there) is one prefill step plus request handling; the median of
  a few repetitions is kept. HTTP on either side is left out: each server adds its own.
- Decode: `B` simultaneous streams with a fixed prompt and output length. The server's own
  mean inter-token latency over the run (`vllm:inter_token_latency_seconds`, which vLLM times
  with engine-core step timestamps) is `coefficients · features` (`step_features`). It is used
  instead of client-side gaps because on a small box the API server and the client share cores
  with the engine and receive tokens in bursts; the engine's timestamps do not move with them.
  The median over repetitions is kept.
"""

from __future__ import annotations

import asyncio
import re
import statistics
from dataclasses import dataclass

import httpx

from workers.engine.profile import LatencyProfile
from workers.vllm.loadgen import LoadSpec, mean_tpot, run_load
from workers.vllm.profile_fit import DecodePoint, PrefillPoint
from workers.vllm.step_features import mean_gap_features

TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
PREFILL_TIME = "vllm:request_prefill_time_seconds"


@dataclass(frozen=True)
class HistogramTotals:
    """`_sum` and `_count` of some histograms on a server's `/metrics`, at one moment."""

    totals: dict[str, tuple[float, float]]

    def mean_since(self, before: HistogramTotals, name: str) -> float:
        """Mean of the observations of `name` made between `before` and this snapshot."""
        mean = self.maybe_mean_since(before, name)
        if mean is None:
            raise RuntimeError(f"no new observations of {name}")
        return mean

    def maybe_mean_since(self, before: HistogramTotals, name: str) -> float | None:
        """Like `mean_since`, but None when there were no observations (or no such metric)."""
        s1, c1 = self.totals[name]
        s0, c0 = before.totals[name]
        return (s1 - s0) / (c1 - c0) if c1 > c0 else None


def histogram_totals(root: str, names: tuple[str, ...] = (TTFT, ITL)) -> HistogramTotals:
    """Sum and count of each histogram in `names` (summed over label sets)."""
    text = httpx.get(f"{root}/metrics", timeout=10).text
    totals = {}
    for name in names:
        totals[name] = (_sample_sum(text, f"{name}_sum"), _sample_sum(text, f"{name}_count"))
    return HistogramTotals(totals)


def _sample_sum(text: str, sample: str) -> float:
    pattern = re.compile(rf"^{re.escape(sample)}(?:{{[^}}]*}})? (\S+)$", re.MULTILINE)
    return sum(float(v) for v in pattern.findall(text))


def measure_prefill(root: str, model: str, lengths: list[int], reps: int = 8) -> list[PrefillPoint]:
    """Per prompt length, the medians over `reps` lone requests of the server's TTFT (from its
    histogram, one request at a time), the client's TTFT and the engine's prefill time (None
    where the server does not export `vllm:request_prefill_time_seconds`)."""
    names = (TTFT, PREFILL_TIME)
    points = []
    for length in lengths:
        server, client, engine = [], [], []
        for rep in range(reps):
            before = histogram_totals(root, names)
            spec = LoadSpec(1, 1, length, 1, seed=length * 100 + rep)
            client.append(asyncio.run(run_load(root, model, spec))[0].ttft_s)
            after = histogram_totals(root, names)
            server.append(after.mean_since(before, TTFT))
            engine.append(after.maybe_mean_since(before, PREFILL_TIME))
        known = [e for e in engine if e is not None]
        engine_s = statistics.median(known) if known else None
        points.append(
            PrefillPoint(length, statistics.median(server), statistics.median(client), engine_s)
        )
    return points


def measure_decode(
    root: str,
    model: str,
    runs: list[tuple[int, int]],
    output_tokens: int,
    profile: LatencyProfile,
    reps: int = 3,
) -> list[DecodePoint]:
    """One point per `(prompt_tokens, batch)` run: medians of `reps` server ITLs and client
    TPOTs, with the step features `profile`'s engine knobs schedule for that run."""
    points = []
    for prompt, batch in runs:
        itls, client = [], []
        for rep in range(reps):
            spec = LoadSpec(batch, 1, prompt, output_tokens, seed=prompt * 1000 + batch * 10 + rep)
            before = histogram_totals(root, (ITL,))
            timings = asyncio.run(run_load(root, model, spec))
            itls.append(histogram_totals(root, (ITL,)).mean_since(before, ITL))
            client.append(mean_tpot(timings))
        features = mean_gap_features(profile, batch, prompt, output_tokens)
        itl, tpot = statistics.median(itls), statistics.median(client)
        points.append(DecodePoint(prompt, batch, output_tokens, itl, tpot, features))
    return points


def kv_capacity_tokens(root: str) -> int:
    """KV cache capacity in tokens from vLLM's `vllm:cache_config_info` metric."""
    text = httpx.get(f"{root}/metrics", timeout=10).text
    line = next(ln for ln in text.splitlines() if ln.startswith("vllm:cache_config_info{"))
    labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
    return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
