"""The soak's verdict: growth after warm-up, failed requests, restarts."""

from __future__ import annotations

from control_plane.bench.footprint import Footprint, parse_used_memory
from control_plane.bench.soak_report import Sample, sample_line, verdict


def _s(t: float, gateway_kb: int, redis: int, pid: int = 10) -> Sample:
    fp = Footprint({"gateway": gateway_kb}, {"gateway": pid}, redis)
    return Sample(t, fp, {"ok": int(t)})


def test_growth_is_measured_from_the_first_sample_after_warmup() -> None:
    samples = [_s(0, 50_000, 1_000), _s(60, 100_000, 2_000), _s(120, 109_000, 2_100)]
    v = verdict(samples, 60.0, {"ok": 120})
    assert v.baseline_t_s == 60
    assert round(v.growth["gateway"], 3) == 0.09
    assert round(v.growth["redis used_memory"], 3) == 0.05
    assert v.passed


def test_growth_of_ten_percent_errors_or_a_restart_fail() -> None:
    grown = [_s(0, 1, 1), _s(60, 100_000, 1_000), _s(120, 110_000, 1_000)]
    assert verdict(grown, 60.0, {"ok": 9}).grown == ["gateway"]
    steady = [_s(0, 1, 1), _s(60, 100_000, 1_000), _s(120, 100_000, 1_000)]
    assert not verdict(steady, 60.0, {"ok": 9, "http_503_state_unavailable": 1}).passed
    restarted = [_s(0, 1, 1), _s(60, 100_000, 1_000), _s(120, 100_000, 1_000, pid=11)]
    assert verdict(restarted, 60.0, {"ok": 9}).restarted == ["gateway"]


def test_too_few_samples_after_warmup_never_pass() -> None:
    assert not verdict([_s(0, 1, 1), _s(60, 1, 1)], 60.0, {"ok": 1}).passed


def test_used_memory_and_the_sample_line() -> None:
    assert parse_used_memory("# Memory\r\nused_memory:12345\r\nused_memory_human:12K\r\n") == 12345
    assert parse_used_memory("") is None
    line = sample_line(_s(61, 2048, 2**20))
    assert line.startswith("[  1:01] ok 61 failed 0 in flight 0") and "gateway 2.0" in line
