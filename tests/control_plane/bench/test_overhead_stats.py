"""The overhead bench's arithmetic: timing header, hops, medians over rounds, Redis deltas."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from control_plane.bench.load import LoadResult, parse_timing
from control_plane.bench.overhead import scratch_dir
from control_plane.bench.overhead_profile import RATE_HZ, commandstats_diff, cpu_of
from control_plane.bench.overhead_stats import hop_medians, over_rounds, round_row


def test_the_timing_header_parses_and_skips_bad_parts() -> None:
    assert parse_timing("received=10.5;submitted=x;granted=11") == {
        "received": 10.5,
        "granted": 11.0,
    }


def test_hops_are_intervals_between_consecutive_stamps() -> None:
    stamps = [
        {"sent": 0.0, "received": 0.001, "submitted": 0.003, "decided": 0.004,
         "granted": 0.006, "upstream": 0.007, "first_byte": 0.010},
    ]  # fmt: skip
    hops = hop_medians(stamps)
    assert [round(h["p50_ms"], 3) for h in hops.values()] == [1.0, 2.0, 1.0, 2.0, 1.0, 3.0]


def test_rounds_report_medians_and_summed_errors() -> None:
    def result(ttft_s: float, errors: int) -> LoadResult:
        return LoadResult(ttft=[ttft_s], total=[ttft_s], errors=errors, wall_s=1.0)

    rounds = [
        round_row({"direct": result(0.001, 0), "gateway": result(g, e)})
        for g, e in ((0.005, 0), (0.009, 1), (0.006, 0))
    ]
    merged = over_rounds(rounds)["gateway"]
    assert round(merged["added_ttft_p50_ms"], 6) == 5.0
    assert merged["errors"] == 1 and merged["requests"] == 3


def test_commandstats_difference_is_per_command_and_costliest_first() -> None:
    before = {"evalsha": {"calls": 10.0, "usec": 100.0}}
    after = {"evalsha": {"calls": 20.0, "usec": 400.0}, "xadd": {"calls": 5.0, "usec": 10.0}}
    rows = commandstats_diff(before, after)
    assert [r["command"] for r in rows] == ["evalsha", "xadd"]
    assert rows[0]["calls"] == 10 and rows[0]["usec_per_call"] == 30.0


def test_cpu_of_collapsed_stacks_sums_samples_and_ranks_own_frames(tmp_path: Path) -> None:
    stacks = tmp_path / "gateway.txt"
    stacks.write_text(
        "main (a.py:1);serve (b.py:2);send (c.py:3) 30\n"
        "main (a.py:1);serve (b.py:2) 10\n"
        "thread (t.py:9);send (c.py:3) 20\n"
    )

    cpu = cpu_of(stacks)

    assert cpu["samples"] == 60 and cpu["cpu_s"] == 60 / RATE_HZ
    assert cpu["top_self"][0] == {"frame": "send (c.py:3)", "share": 50 / 60}
    assert cpu["top_self"][1]["frame"] == "serve (b.py:2)"
    assert cpu_of(tmp_path / "absent.txt")["samples"] == 0


def test_cpu_and_switches_per_request_are_the_median_over_rounds_per_process() -> None:
    def row(gw: float) -> dict[str, object]:
        one = LoadResult(ttft=[0.001], total=[0.001], wall_s=1.0)
        r = round_row({"direct": one, "gateway": one})
        r["gateway"]["cpu_ms_per_request"] = {"gateway": gw, "total": gw + 1.0}
        r["gateway"]["waits_per_request"] = {"gateway": 10 * gw, "total": 10 * gw + 2.0}
        r["gateway"]["preempted_per_request"] = {"gateway": gw / 10, "total": gw / 10}
        return r

    merged = over_rounds([row(0.5), row(0.9), row(0.6)])["gateway"]
    assert merged["cpu_ms_per_request"] == {"gateway": 0.6, "total": 1.6}
    assert merged["waits_per_request"] == {"gateway": 6.0, "total": 8.0}
    assert merged["preempted_per_request"] == {"gateway": 0.06, "total": 0.06}


def test_each_hop_reports_the_median_over_rounds_of_its_p50_and_p99() -> None:
    def row(first_byte_ms: list[float]) -> dict[str, object]:
        stamps = [
            {"sent": 0.0, "received": 0.001, "upstream": 0.002, "first_byte": 0.002 + ms / 1000}
            for ms in first_byte_ms
        ]
        one = LoadResult(ttft=[0.001], total=[0.001], wall_s=1.0)
        r = round_row({"direct": one, "gateway": one})
        r["gateway"]["hops"] = hop_medians(stamps)
        return r

    slow_tail = [1.0] * 99 + [9.0]
    merged = over_rounds([row(slow_tail), row([2.0] * 100), row(slow_tail)])["gateway"]
    assert round(merged["hops_p50_ms"]["first byte"], 6) == 1.0
    assert round(merged["hops_p99_ms"]["first byte"], 1) >= 8.9  # two rounds of three had it


def test_a_runs_scratch_directory_goes_unless_the_run_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch_dir("arb-bench-") as ok:
        (ok / "logs").mkdir()
    assert not ok.exists()
    with pytest.raises(RuntimeError), scratch_dir("arb-bench-") as failed:
        (failed / "logs").mkdir()
        raise RuntimeError("the deployment did not start")
    assert (failed / "logs").is_dir()  # kept: its logs say why
