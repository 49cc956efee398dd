"""The soak's verdict: growth after warm-up (medians of windows), failed requests, restarts."""

from __future__ import annotations

from control_plane.bench.footprint import Footprint, parse_used_memory
from control_plane.bench.soak_report import Sample, sample_line, table, verdict


def _s(t: float, gateway_kb: int, redis: int, pid: int = 10) -> Sample:
    fp = Footprint({"gateway": gateway_kb}, {"gateway": pid}, redis)
    return Sample(t, fp, {"ok": int(t)}, sent=int(t) + 2)


def _run(levels: list[tuple[int, int]], pid_last: int = 10) -> list[Sample]:
    """One sample a minute; the first is taken during warm-up at a quarter of the level."""
    out = [_s(0, 1, 1)]
    for i, (kb, used) in enumerate(levels, start=1):
        out.append(_s(60 * i, kb, used, pid_last if i == len(levels) else 10))
    return out


def test_growth_compares_the_medians_of_the_first_and_last_windows_after_warmup() -> None:
    samples = _run([(100_000, 2_000), (90_000, 2_100), (105_000, 1_900), (109_000, 2_100)] * 2)
    v = verdict(samples, 60.0, {"ok": 480}, window=3)
    assert v.baseline_t_s == 60 and v.end_t_s == 360
    assert v.baseline["gateway"] == 100_000 and v.end["gateway"] == 105_000
    assert round(v.growth["gateway"], 3) == 0.05
    assert round(v.growth["redis used_memory"], 3) == 0.05
    assert v.passed
    assert "+5.0 %" in str(table(v).columns[3]._cells)


def test_one_spike_does_not_fail_but_a_rising_level_does() -> None:
    spike = _run([(100_000, 1_000)] * 5 + [(150_000, 1_000), (100_000, 1_000)])
    assert verdict(spike, 60.0, {"ok": 9}, window=3).passed
    rising = _run([(100_000 + 4_000 * i, 1_000 + 40 * i) for i in range(7)])
    v = verdict(rising, 60.0, {"ok": 9}, window=3)
    assert v.grown == ["gateway", "redis used_memory"] and not v.passed


def test_errors_or_a_restart_fail() -> None:
    steady = _run([(100_000, 1_000)] * 6)
    assert verdict(steady, 60.0, {"ok": 9}, window=3).passed
    assert not verdict(steady, 60.0, {"ok": 9, "http_503_state_unavailable": 1}, window=3).passed
    a_few = verdict(steady, 60.0, {"ok": 99, "not_sent_generator_behind": 1}, window=3)
    assert (a_few.failed_requests, a_few.unsent, a_few.held) == (0, 1, 0.99) and a_few.passed
    behind = verdict(steady, 60.0, {"ok": 94, "not_sent_client_backlog": 6}, window=3)
    assert behind.held == 0.94 and not behind.passed  # measured at a lower load than planned
    restarted = _run([(100_000, 1_000)] * 6, pid_last=11)
    v = verdict(restarted, 60.0, {"ok": 9}, window=3)
    assert v.restarted == ["gateway"] and not v.passed


def test_too_few_samples_after_warmup_never_pass() -> None:
    assert not verdict(_run([(1, 1)] * 5), 60.0, {"ok": 1}, window=3).passed
    assert verdict(_run([(1, 1)] * 6), 60.0, {"ok": 1}, window=3).passed


def test_used_memory_and_the_sample_line() -> None:
    assert parse_used_memory("# Memory\r\nused_memory:12345\r\nused_memory_human:12K\r\n") == 12345
    assert parse_used_memory("") is None
    line = sample_line(_s(61, 2048, 2**20))
    assert (
        line.startswith("[  1:01] sent 63 (not sent 0) ok 61 failed 0 in flight 0")
        and "gateway 2.0" in line
    )
