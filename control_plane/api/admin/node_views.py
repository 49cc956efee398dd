"""Per-node live views (tenant → application → agent) for `GET /admin/nodes` (pure).

Inputs are what the scheduler leader checkpoints (its ledger: counters, service, sliding SLO
windows, ExFairS accounts), per-node queue and in-flight counts, weights, and the last hour of
SLO outcomes from the SQL rollups. SAFI follows docs/algorithms.md §16.1 at every level:
`SAFI = α · violation rate + (1 − α) · windowed service / the largest windowed service among the
nodes of that level` (lower is better); its two parts are reported next to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from control_plane.contracts.checkpoints import NodeCount
from control_plane.contracts.knobs import Fairness
from control_plane.contracts.requests import RequestRecord
from control_plane.core.ledger import Ledger, Node
from control_plane.policies.safi import jain

LEVELS = {1: "tenant", 2: "app", 3: "agent"}
DEFAULT_ALPHA = 0.7
DEFAULT_BETA = 0.1


@dataclass(frozen=True, slots=True)
class HourStats:
    """SLO outcomes of a node over the last hour (from the rollups)."""

    violations: int
    finished: int


@dataclass(frozen=True, slots=True)
class LiveInputs:
    """Everything `node_views` reads; missing sources are empty."""

    ledger: Ledger
    counts: Mapping[Node, tuple[int, int]]
    """Node → (queued, in flight)."""
    weights: Mapping[Node, float]
    hour: Mapping[Node, HourStats]
    now: float
    alpha: float = DEFAULT_ALPHA
    loads: Mapping[Node, NodeCount] = field(default_factory=dict)
    """The leader's per-node demand, entitlement, waits and status (its live view)."""


def fairness_params(policy_params: Mapping[str, Any], knob: Fairness | None) -> tuple[float, float]:
    """(α, β): the active policy's when it has them (ExFairS), else the `fairness` knob's,
    else the defaults 0.7 and 0.1."""
    knob = knob or Fairness()
    alpha = DEFAULT_ALPHA if knob.alpha is None else knob.alpha
    beta = DEFAULT_BETA if knob.beta is None else knob.beta
    return float(policy_params.get("alpha", alpha)), float(policy_params.get("beta", beta))


def _attainment(violations: float, finished: float) -> float | None:
    return None if finished <= 0 else 1.0 - violations / finished


def _all_nodes(inputs: LiveInputs) -> list[Node]:
    seen: set[Node] = set()
    for depth in LEVELS:
        seen.update(inputs.ledger.nodes_at(depth))
    for source in (inputs.counts, inputs.weights, inputs.hour, inputs.loads):
        seen.update(node for node in source if 1 <= len(node) <= 3)
    return sorted(seen)


def _row(node: Node, inputs: LiveInputs, peak: float) -> dict[str, Any]:
    ledger, now = inputs.ledger, inputs.now
    window = ledger.window(node, now)
    stats = ledger.stats(node)
    account = ledger.find_account(node)
    queued, inflight = inputs.counts.get(node, (0, 0))
    hour = inputs.hour.get(node, HourStats(0, 0))
    usage = window.service / peak if peak > 0 else 0.0
    load = inputs.loads.get(node)
    return {
        "key": "/".join(node),
        "path": list(node),
        "level": LEVELS[len(node)],
        "parent": "/".join(node[:-1]) or None,
        "weight": inputs.weights.get(node, 1.0),
        "queued": queued,
        "inflight": inflight,
        "counter": ledger.counter(node),
        "service": ledger.service(node),
        "service_window": window.service,
        "service_rate": load.service_rate if load else window.service / ledger.window_s,
        **_load_fields(load),
        "tokens_in": stats.tokens_in if stats else 0,
        "tokens_out": stats.tokens_out if stats else 0,
        "completed": stats.completed if stats else 0,
        "completed_1m": window.completed,
        "violations_1m": window.violations,
        "slo_attainment_1m": _attainment(window.violations, window.completed),
        "finished_1h": hour.finished,
        "violations_1h": hour.violations,
        "slo_attainment_1h": _attainment(hour.violations, hour.finished),
        "safi_slo": window.violation_rate,
        "safi_usage": usage,
        "safi": inputs.alpha * window.violation_rate + (1 - inputs.alpha) * usage,
        "credit": account.credit if account else 0,
        "resource": account.resource if account else 0,
    }


def _load_fields(load: NodeCount | None) -> dict[str, Any]:
    """The live view's fields of a node; without a leader: no demand, no waits, `ok`."""
    load = load or NodeCount(())
    return {
        "demand_rate": load.demand_rate,
        "entitled_rate": load.entitled_rate,
        "entitled_share": load.entitled_share,
        "received_share": load.received_share,
        "wait_p95_s": load.wait_p95_s,
        "oldest_wait_s": load.oldest_wait_s,
        "backlogged": load.backlogged,
        "status": load.status,
    }


def totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
    """Header totals, summed over the tenant rows of the same snapshot as the table."""
    tenants = [r for r in rows if r["level"] == "tenant"]
    return {
        "queued": sum(int(r["queued"]) for r in tenants),
        "inflight": sum(int(r["inflight"]) for r in tenants),
        "demand_rate": sum(float(r["demand_rate"]) for r in tenants),
        "service_rate": sum(float(r["service_rate"]) for r in tenants),
        "starved": sum(1 for r in rows if r["status"] == "starved"),
        "over_served": sum(1 for r in rows if r["status"] == "over-served"),
    }


def _active(row: Mapping[str, Any]) -> bool:
    return bool(row["service_window"] or row["completed_1m"] or row["queued"] or row["inflight"])


def node_views(inputs: LiveInputs) -> list[dict[str, Any]]:
    """One row per node at every level, sorted by path."""
    nodes = _all_nodes(inputs)
    peaks = {
        depth: max(
            (inputs.ledger.window(n, inputs.now).service for n in nodes if len(n) == depth),
            default=0.0,
        )
        for depth in LEVELS
    }
    return [_row(node, inputs, peaks[len(node)]) for node in nodes]


def level_jain(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | int]]:
    """Per level, over the nodes active in the window: Jain's index of windowed service per
    unit weight and of SAFI."""
    out: dict[str, dict[str, float | int]] = {}
    for level in LEVELS.values():
        active = [r for r in rows if r["level"] == level and _active(r)]
        out[level] = {
            "service": jain(r["service_window"] / r["weight"] for r in active),
            "safi": jain(r["safi"] for r in active),
            "nodes": len(active),
        }
    return out


def counts_from_records(records: Iterable[RequestRecord]) -> dict[Node, tuple[int, int]]:
    """Queued / in-flight counts at every level from Redis request records."""
    counts: dict[Node, list[int]] = {}
    for record in records:
        if record.envelope is None:
            continue
        path = record.envelope.job.path
        slot = 0 if record.status == "queued" else 1
        for depth in LEVELS:
            counts.setdefault(path[:depth], [0, 0])[slot] += 1
    return {node: (pair[0], pair[1]) for node, pair in counts.items()}


def counts_from_live(nodes: Iterable[Mapping[str, Any]]) -> dict[Node, tuple[int, int]]:
    """The same counts from the live view's `nodes` list (when the leader provides it)."""
    return {
        tuple(str(p) for p in n["path"]): (int(n.get("queued", 0)), int(n.get("inflight", 0)))
        for n in nodes
    }
