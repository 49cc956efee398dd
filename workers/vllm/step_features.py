"""What the engine model says a measured run consists of, step by step (for exact fits).

The profile's step time is linear in its coefficients: `step = x · f` with the step features
`f = (1, [prefill_tokens > 0], prefill_tokens, decode_seqs, decode_ctx_tokens)`. A run of
`batch` requests that all arrive at once is scheduled the same whatever the coefficients, so
replaying it through the engine model (`workers.engine`) with a recording latency model gives
the features of every step, and the mean inter-token latency of the run is `x · F` where `F` is
the mean, over every inter-token gap of every request, of the summed features of the steps in
that gap. This accounts for chunked prefills that overlap other streams' decoding exactly as the
simulated worker will.
"""

from __future__ import annotations

import itertools

from workers.engine.engine import Engine
from workers.engine.profile import LatencyModel, LatencyProfile
from workers.engine.replay import replay
from workers.engine.step import EngineConfig, EngineRequest

Features = tuple[float, float, float, float, float]


class _RecordingLatency(LatencyModel):
    """Every step lasts 1 s (so step k spans [k, k+1)); its features are recorded."""

    def __init__(self, profile: LatencyProfile) -> None:
        super().__init__(profile.model_copy(update={"jitter_cv": 0.0}))
        self.steps: list[Features] = []

    def step_time(self, prefill_tokens: int, decode_seqs: int, decode_ctx_tokens: int) -> float:
        has_prefill = 1.0 if prefill_tokens > 0 else 0.0
        self.steps.append(
            (1.0, has_prefill, float(prefill_tokens), float(decode_seqs), float(decode_ctx_tokens))
        )
        return 1.0


def mean_gap_features(
    profile: LatencyProfile, batch: int, prompt_tokens: int, output_tokens: int
) -> Features:
    """Mean summed step features per inter-token gap of `batch` simultaneous requests."""
    latency = _RecordingLatency(profile)
    engine = Engine(latency, EngineConfig.from_profile(profile))
    arrivals = [(0.0, EngineRequest(f"r{i}", prompt_tokens, output_tokens)) for i in range(batch)]
    token_steps: dict[str, list[int]] = {}
    for step in replay(engine, arrivals):
        for event in step.tokens:
            token_steps.setdefault(event.req_id, []).append(round(step.start))
    totals = [0.0] * 5
    gaps = 0
    for steps in token_steps.values():
        for before, after in itertools.pairwise(steps):
            for k in range(before + 1, after + 1):
                totals = [t + f for t, f in zip(totals, latency.steps[k], strict=True)]
            gaps += 1
    if gaps == 0:
        raise ValueError("a decode run needs at least 2 output tokens")
    a, b, c, d, e = (t / gaps for t in totals)
    return (a, b, c, d, e)
