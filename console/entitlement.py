"""What each node was entitled to, given what it asked for: weighted max-min fairness.

Share against weight alone calls a light tenant starved when it simply asked for less. The
entitlement here is the water-filling allocation: capacity is split by weight, a node that
asked for less than its weighted part gets exactly what it asked, and what it leaves is split
among the others by weight again, until the capacity or every demand is used up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def water_fill(
    demands: Mapping[str, float], weights: Mapping[str, float], capacity: float
) -> dict[str, float]:
    """Weighted max-min fair allocation of `capacity` among `demands`.

    Guarantees: no node gets more than it asked; the allocations sum to
    `min(capacity, Σ demands)` (nodes with weight ≤ 0 get nothing, so without positive weights
    the sum is 0); two nodes with equal weights and equal demands get equal allocations; a node
    below its fair level is given its whole demand.
    """
    alloc = {key: 0.0 for key in demands}
    active = {k for k, d in demands.items() if d > 0 and weights.get(k, 0.0) > 0}
    remaining = max(capacity, 0.0)
    while active and remaining > 0:
        total_weight = sum(weights[k] for k in active)
        level = remaining / total_weight
        satisfied = {k for k in active if demands[k] - alloc[k] <= level * weights[k]}
        if not satisfied:
            for key in active:
                alloc[key] += level * weights[key]
            return alloc
        for key in satisfied:
            remaining -= demands[key] - alloc[key]
            alloc[key] = demands[key]
        active -= satisfied
    return alloc


def node_demand(node: Mapping[str, Any]) -> float:
    """A report node's demand in Unified Tokens: what its served requests received, plus its
    failed requests priced at the mean cost of its served ones (what they asked, had they run).
    """
    service = float(node.get("unified_service") or 0.0)
    ok, failed = int(node.get("ok") or 0), int(node.get("failed") or 0)
    return service + (service / ok * failed if ok else 0.0)


def entitled_shares(nodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each report node's (by `key`) demand-aware entitled share of the period's service: the
    water-filling allocation of the service actually delivered, as a fraction of it (0 when
    nothing was delivered)."""
    demands = {str(n["key"]): node_demand(n) for n in nodes}
    weights = {str(n["key"]): float(n.get("weight") or 0.0) for n in nodes}
    capacity = sum(float(n.get("unified_service") or 0.0) for n in nodes)
    if capacity <= 0:
        return {key: 0.0 for key in demands}
    return {key: value / capacity for key, value in water_fill(demands, weights, capacity).items()}
