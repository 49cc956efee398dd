"""Load generation, measurement and fitting against a real simulated worker process.

The simulated worker runs a profile with known, deliberately slow coefficients (and no jitter),
so the fit of what the client and the server's histograms show must give them back.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import yaml

from workers.engine.profile import PROFILES_DIR, load_profile
from workers.vllm.loadgen import LoadSpec, load, mean_tpot
from workers.vllm.measure import TTFT, histogram_totals, measure_decode, measure_prefill
from workers.vllm.profile_fit import fit_profile
from workers.vllm.servers import running_sim

SLOW = {
    "step_overhead": 0.012,
    "prefill_overhead": 0.004,
    "prefill_per_token": 0.00002,
    "decode_per_seq": 0.001,
    "decode_per_ctx_token": 0.000001,
    "jitter_cv": 0.0,
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    d = tmp_path_factory.mktemp("sim")
    profile = d / "slow.yaml"
    shutil.copyfile(PROFILES_DIR / "tiny-cpu.yaml", profile)
    data = yaml.safe_load(profile.read_text())
    profile.write_text(yaml.safe_dump({**data, **SLOW}))
    with running_sim(profile, d / "sim.log") as root:
        yield root


def test_load_gets_exact_lengths_and_times_every_token(sim: str) -> None:
    before = histogram_totals(sim)
    timings = load(sim, "tiny-llama", LoadSpec(4, 2, 50, 10, seed=3))
    assert len(timings) == 8
    for t in timings:
        assert (t.prompt_tokens, t.completion_tokens) == (50, 10)
        assert [n for _, n in t.arrivals] == list(range(1, 11))
        times = [at for at, _ in t.arrivals]
        assert times == sorted(times)
        assert t.ttft_s >= SLOW["step_overhead"] + SLOW["prefill_overhead"]
    # four streams decode together: a step costs at least overhead + 4 sequences
    assert mean_tpot(timings) >= 0.9 * (SLOW["step_overhead"] + 4 * SLOW["decode_per_seq"])
    after = histogram_totals(sim)
    assert after.totals[TTFT][1] - before.totals[TTFT][1] == 8


def test_measurements_of_the_sim_fit_back_to_its_profile(sim: str) -> None:
    prefill = measure_prefill(sim, "tiny-llama", [16, 512, 1536], reps=3)
    runs = [(16, 1), (16, 4), (16, 16), (1024, 1), (256, 16)]
    profile = load_profile("tiny-cpu")
    decode = measure_decode(sim, "tiny-llama", runs, output_tokens=12, profile=profile, reps=2)
    assert all(p.engine_prefill_s is None for p in prefill)  # the sim does not export it
    fit = fit_profile(prefill, decode)
    c = fit.coefficients
    assert max(abs(r) for r in fit.residuals) < 0.15
    assert c["step_overhead"] == pytest.approx(SLOW["step_overhead"], rel=0.25)
    assert c["decode_per_seq"] == pytest.approx(SLOW["decode_per_seq"], rel=0.25)
    assert c["prefill_per_token"] == pytest.approx(SLOW["prefill_per_token"], rel=0.3)
    lone = c["step_overhead"] + c["prefill_overhead"]
    assert lone == pytest.approx(SLOW["step_overhead"] + SLOW["prefill_overhead"], rel=0.25)
