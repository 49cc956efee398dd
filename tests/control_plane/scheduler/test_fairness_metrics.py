"""The fairness collector: computed at the scrape, the busiest nodes within the series cap,
nothing once not leading."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from control_plane.scheduler.fairness_view import NodeFairness
from control_plane.scheduler.metrics import FairnessCollector


def row(path: tuple[str, ...], queued: int, rate: float = 0.0) -> NodeFairness:
    return NodeFairness(path, queued, 0, 0.0, 1.0, 0, 0.5, rate, None)


def text(collector: FairnessCollector) -> str:
    registry = CollectorRegistry()
    registry.register(collector)
    return generate_latest(registry).decode()


def test_the_cap_keeps_the_busiest_nodes_and_counts_the_rest() -> None:
    collector = FairnessCollector(max_series=2)
    rows = [row(("idle",), 0), row(("busy",), 9), row(("served",), 0, rate=5.0)]
    collector.serve(lambda: (rows, "vtc", {"level": 1}))
    out = text(collector)
    assert 'arbiter_node_queued{agent="",app="",level="tenant",tenant="busy"} 9.0' in out
    assert 'tenant="served"' in out and 'tenant="idle"' not in out
    assert "arbiter_node_series_dropped 1.0" in out
    assert 'arbiter_policy_info{params="{\\"level\\": 1}",policy="vtc"} 1.0' in out
    assert "arbiter_node_slo_attainment{" not in out  # nothing completed: no sample


def test_each_scrape_reads_the_core_afresh() -> None:
    collector = FairnessCollector()
    queued = [0]
    collector.serve(lambda: ([row(("t",), queued[0])], "vtc", {}))
    assert 'tenant="t"} 0.0' in text(collector)
    queued[0] = 4
    assert 'arbiter_node_queued{agent="",app="",level="tenant",tenant="t"} 4.0' in text(collector)


def test_clear_leaves_no_node_and_no_policy() -> None:
    collector = FairnessCollector()
    collector.serve(lambda: ([row(("t", "a", "g"), 1)], "hmfs", {}))
    assert 'level="agent"' in text(collector)
    collector.clear()
    out = text(collector)
    assert "level=" not in out and "arbiter_policy_info{" not in out
