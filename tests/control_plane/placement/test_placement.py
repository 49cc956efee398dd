"""Placement plug-ins: least-loaded, round-robin, KV-aware."""

from __future__ import annotations

import pytest

from control_plane.core.plugins import PluginParamsError
from control_plane.core.worker_view import WorkerView
from control_plane.placement.registry import build_placement, names
from tests.control_plane.policies.jobs import job


def worker(id: str, **fields: object) -> WorkerView:
    base: dict[str, object] = {"id": id, "model": "m", "max_num_seqs": 8, "kv_tokens": 1000}
    return WorkerView(**(base | fields))  # type: ignore[arg-type]


def test_least_loaded_relative_to_capacity_then_kv_usage_then_id() -> None:
    placement = build_placement("least_loaded")
    big = worker("big", max_num_seqs=16, inflight=4)  # 0.25
    small = worker("small", max_num_seqs=4, inflight=2)  # 0.5
    assert placement.choose(job("x"), [small, big], 0.0).id == "big"
    a, b = worker("a", kv_usage=0.5), worker("b", kv_usage=0.1)
    assert placement.choose(job("x"), [a, b], 0.0).id == "b"
    assert placement.choose(job("x"), [worker("z"), worker("y")], 0.0).id == "y"


def test_round_robin_cycles_in_id_order_over_whoever_admits() -> None:
    placement = build_placement("round_robin")
    ws = [worker("c"), worker("a"), worker("b")]
    chosen = []
    for _ in range(4):
        w = placement.choose(job("x"), ws, 0.0)
        placement.on_dispatch(job("x"), w, 0.0)
        chosen.append(w.id)
    assert chosen == ["a", "b", "c", "a"]
    w = placement.choose(job("x"), [worker("a"), worker("c")], 0.0)  # b is full
    assert w.id == "c"
    assert placement.snapshot()["last"] == "a"
    again = build_placement("round_robin")
    again.restore(placement.snapshot())
    assert again.choose(job("x"), ws, 0.0).id == "b"


def test_kv_aware_prefers_headroom_and_avoids_recent_preemptions() -> None:
    placement = build_placement("kv_aware", {"preemption_cooldown_s": 10.0})
    roomy = worker("roomy", inflight_tokens=100)
    tight = worker("tight", inflight_tokens=100, kv_usage=0.7)  # scraped usage dominates
    assert placement.choose(job("x"), [tight, roomy], 0.0).id == "roomy"
    preempting = worker("roomy", inflight_tokens=0, last_preemption_at=95.0)
    assert placement.choose(job("x"), [preempting, tight], 100.0).id == "tight"
    assert placement.choose(job("x"), [preempting, tight], 106.0).id == "roomy"
    assert placement.choose(job("x"), [preempting], 100.0).id == "roomy"


def test_registry() -> None:
    assert names() == ["kairos_slots", "kv_aware", "least_loaded", "round_robin"]
    with pytest.raises(PluginParamsError):
        build_placement("least_loaded", {"x": 1})
