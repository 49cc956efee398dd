"""Report arithmetic: Jain's index, shares, SAFI, weights, series, the JSON form and shares per
model kind."""

from __future__ import annotations

import json

import pytest

from storage.reports import (
    KindTotals,
    NodeLatency,
    Path,
    Percentiles,
    WindowTotals,
    assemble_report,
    jain,
    kind_service,
)
from storage.rollup_stats import Counters


def test_jain_index() -> None:
    assert jain([5.0, 5.0, 5.0]) == pytest.approx(1.0)
    assert jain([1.0, 0.0]) == pytest.approx(0.5)
    assert jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain([]) == 1.0 and jain([0.0, 0.0]) == 1.0


def test_assembled_figures() -> None:
    stats: dict[Path, Counters] = {
        ("a",): Counters(requests=4, ok=3, failed=1, violations=1, unified_service=300.0,
                         n_queue=2, sum_queue_ms=50.0),
        ("b",): Counters(requests=2, ok=1, unified_service=100.0),
    }  # fmt: skip
    latency: dict[Path, NodeLatency] = {
        ("a",): NodeLatency(Percentiles(1.0, 2.0, 3.0), None, None),
        ("b",): NodeLatency(None, None, None),
    }
    windows: dict[int, dict[Path, WindowTotals]] = {
        0: {("a",): WindowTotals(300.0, 1, 4)},
        120: {("b",): WindowTotals(100.0, 0, 1)},
    }
    report = assemble_report(
        level="tenant", span=(0, 180, 60), source="rollups", stats=stats, latency=latency,
        windows=windows, weights={"a": 3.0}, alpha=0.7,
    )  # fmt: skip
    a, b = report.node("a"), report.node("b")
    assert (a.share, b.share) == (0.75, 0.25)
    assert a.violation_rate == 0.25 and b.violation_rate == 0.0
    assert a.safi == pytest.approx(0.7 * 0.25 + 0.3 * 1.0)
    assert b.safi == pytest.approx(0.3 * (100.0 / 300.0))
    assert a.mean_queue_ms == 25.0 and b.mean_queue_ms is None
    assert report.jain_service == pytest.approx(1.0)  # 300/3 == 100/1: fair for the weights
    assert [w.start for w in report.series] == [0, 60, 120]
    # a window in which nobody was served has no Jain's index (not a perfect 1.0)
    assert (
        report.series[1].service == {"a": 0.0, "b": 0.0} and report.series[1].jain_service is None
    )
    assert json.loads(json.dumps(report.to_json()))["series"][1]["jain_service"] is None
    assert report.series[0].jain_service == pytest.approx(0.5)
    with pytest.raises(KeyError):
        report.node("c")
    data = json.loads(json.dumps(report.to_json()))
    assert data["nodes"][0]["key"] == "a" and data["nodes"][0]["ttft_ms"]["p99"] == 3.0
    assert data["series"][2]["service"] == {"a": 0.0, "b": 100.0}


def test_kind_shares_are_per_kind_and_ordered() -> None:
    rows = kind_service(
        [
            KindTotals("b", "vlm", 1, 10, 1, 30.0),
            KindTotals("b", "llm", 2, 20, 2, 60.0),
            KindTotals("a", "audio", 1, 5, 0, 0.0),
            KindTotals("a", "llm", 1, 10, 1, 20.0),
            KindTotals("a", "vlm", 1, 10, 1, 90.0),
        ]
    )
    assert [(r.tenant, r.kind) for r in rows] == [
        ("a", "llm"), ("a", "vlm"), ("a", "audio"), ("b", "llm"), ("b", "vlm"),
    ]  # fmt: skip
    shares = {(r.tenant, r.kind): r.share for r in rows}
    assert shares["a", "llm"] == pytest.approx(0.25) and shares["b", "llm"] == pytest.approx(0.75)
    assert shares["a", "vlm"] == pytest.approx(0.75) and shares["b", "vlm"] == pytest.approx(0.25)
    assert shares["a", "audio"] == 0.0  # a kind with no service: no share, no division by 0
    assert kind_service([]) == []
