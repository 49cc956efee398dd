"""Fitting step-time coefficients, and writing them back into a profile file."""

from __future__ import annotations

import itertools
import shutil
import statistics
from pathlib import Path

import pytest

from workers.engine.engine import Engine
from workers.engine.profile import PROFILES_DIR, LatencyModel, LatencyProfile, load_profile
from workers.engine.replay import replay
from workers.engine.step import EngineConfig, EngineRequest
from workers.vllm.profile_fit import COEFFICIENTS, DecodePoint, Fit, PrefillPoint, fit_profile
from workers.vllm.profile_fit import write_profile as write_fit
from workers.vllm.step_features import mean_gap_features

TRUE = {
    "step_overhead": 0.003,
    "prefill_overhead": 0.004,
    "prefill_per_token": 0.00005,
    "decode_per_seq": 0.0002,
    "decode_per_ctx_token": 0.0000004,
}


def engine_mean_itl(profile: LatencyProfile, batch: int, prompt: int, out: int) -> float:
    """Mean inter-token latency of a run, timed by the engine model itself (no features)."""
    engine = Engine(LatencyModel(profile), EngineConfig.from_profile(profile))
    arrivals = [(0.0, EngineRequest(f"r{i}", prompt, out)) for i in range(batch)]
    times: dict[str, list[float]] = {}
    for step in replay(engine, arrivals):
        for event in step.tokens:
            times.setdefault(event.req_id, []).append(step.end)
    gaps = [b - a for t in times.values() for a, b in itertools.pairwise(t)]
    return statistics.fmean(gaps)


RUNS = [(16, 1), (16, 4), (16, 16), (16, 64), (1536, 1), (256, 32), (768, 8)]


def model_points(noise: float = 0.0) -> tuple[list[PrefillPoint], list[DecodePoint]]:
    """Points timed by the engine model with the TRUE coefficients (alternating ± noise)."""
    profile = load_profile("tiny-cpu").model_copy(update={**TRUE, "jitter_cv": 0.0})
    m = LatencyModel(profile)
    sign = [1, -1]
    prefill = [
        PrefillPoint(n, m.step_time(n, 0, 0) * (1 + noise * sign[i % 2]), 0.0, None)
        for i, n in enumerate((16, 128, 512, 1024, 1920))
    ]
    decode = []
    for i, (prompt, batch) in enumerate(RUNS):
        itl = engine_mean_itl(profile, batch, prompt, 64) * (1 + noise * sign[i % 2])
        features = mean_gap_features(profile, batch, prompt, 64)
        decode.append(DecodePoint(prompt, batch, 64, itl, 0.0, features))
    return prefill, decode


def test_fit_recovers_the_coefficients_of_exact_points() -> None:
    fit = fit_profile(*model_points())
    for name in COEFFICIENTS:
        assert fit.coefficients[name] == pytest.approx(TRUE[name], rel=1e-4, abs=1e-9), name
    assert max(abs(r) for r in fit.residuals) < 1e-6
    assert fit.predict_prefill(256) == pytest.approx(0.003 + 0.004 + 0.00005 * 256)
    short = DecodePoint(16, 2, 8, 0.0, 0.0, (1.0, 0.0, 0.0, 2.0, 200.0))
    assert fit.predict_decode(short) == pytest.approx(0.003 + 0.0004 + 0.0000004 * 200)


def test_fit_stays_non_negative_and_close_with_noise() -> None:
    fit = fit_profile(*model_points(noise=0.05))
    assert all(v >= 0 for v in fit.coefficients.values())
    assert max(abs(r) for r in fit.residuals) < 0.15
    assert fit.coefficients["prefill_per_token"] == pytest.approx(TRUE["prefill_per_token"], 0.2)
    assert fit.coefficients["decode_per_seq"] == pytest.approx(TRUE["decode_per_seq"], rel=0.2)


def test_fit_needs_enough_points() -> None:
    prefill, decode = model_points()
    with pytest.raises(ValueError):
        fit_profile(prefill[:1], decode)
    with pytest.raises(ValueError):
        fit_profile(prefill, decode[:2])


def test_written_profile_validates_and_keeps_other_fields(tmp_path: Path) -> None:
    path = tmp_path / "tiny-cpu.yaml"
    shutil.copyfile(PROFILES_DIR / "tiny-cpu.yaml", path)
    before = load_profile(str(path))
    fit = Fit(dict(TRUE), [0.0])
    write_fit(path, fit, kv_tokens=524288, source="measured today", description="tiny on CPU")
    after = load_profile(str(path))
    assert after.step_overhead == TRUE["step_overhead"]
    assert after.decode_per_ctx_token == TRUE["decode_per_ctx_token"]
    assert (after.kv_tokens, after.source, after.description) == (
        524288,
        "measured today",
        "tiny on CPU",
    )
    assert after.model == before.model and after.max_num_seqs == before.max_num_seqs
    assert after.jitter_cv == before.jitter_cv and after.output_len == before.output_len
    assert path.read_text().startswith("# Fitted by `arbiter worker fidelity`")
