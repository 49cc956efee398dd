"""What each node was entitled to, given what it asked for: hierarchical weighted max-min
fairness.

Share against weight alone (the API's `entitled_share`) calls a light tenant starved when it
simply asked for less. The entitlement here is the water-filling allocation: capacity is split
by weight, a node that asked for less than its weighted part gets exactly what it asked, and
what it leaves is split among the others by weight again, until the capacity or every demand
is used up. It is done down the hierarchy as HMFS shares (docs/algorithms.md §3): first among
the tenants, then each tenant's allocation among its applications, then among their agents,
so what an application leaves goes to its sibling applications before any other tenant.
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


def _path_weights(node: Mapping[str, Any]) -> tuple[tuple[str, ...], list[float]]:
    """A node's path and the weights along it (a report without `path_weights` is read as
    every level above the node weighing 1, the API's default)."""
    path = tuple(node.get("path") or str(node["key"]).split("/"))
    along = node.get("path_weights")
    if along is None:
        along = [1.0] * (len(path) - 1) + [node.get("weight") or 0.0]
    return path, [float(w) for w in along]


def hierarchical_fill(
    demands: Mapping[tuple[str, ...], float],
    weights: Mapping[tuple[str, ...], float],
    capacity: float,
) -> dict[tuple[str, ...], float]:
    """`water_fill` down the hierarchy: `capacity` among the tenants (each with the summed
    demand of its nodes), then each one's allocation among its children, down to the nodes
    of `demands` (paths of one depth; `weights` gives every prefix of them).

    Guarantees, as `water_fill`'s with positive weights: no node gets more than it asked and
    the allocations sum to `min(capacity, Σ demands)`; at every depth siblings share their
    parent's allocation by weighted max-min fairness.
    """
    deepest = max((len(path) for path in demands), default=0)
    alloc: dict[tuple[str, ...], float] = {(): capacity}
    for depth in range(deepest):
        children: dict[tuple[str, ...], dict[str, float]] = {}
        for path, demand in demands.items():
            kids = children.setdefault(path[:depth], {})
            kids[path[depth]] = kids.get(path[depth], 0.0) + demand
        for parent, kids in children.items():
            kid_weights = {name: weights[(*parent, name)] for name in kids}
            for name, value in water_fill(kids, kid_weights, alloc[parent]).items():
                alloc[(*parent, name)] = value
    return {path: alloc[path] for path in demands}


def entitled_shares(nodes: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each report node's (by `key`) demand-aware entitled share of the period's service: the
    `hierarchical_fill` allocation of the service actually delivered, as a fraction of it (0
    when nothing was delivered)."""
    demands: dict[tuple[str, ...], float] = {}
    weights: dict[tuple[str, ...], float] = {}
    keys: dict[tuple[str, ...], str] = {}
    for node in nodes:
        path, along = _path_weights(node)
        keys[path], demands[path] = str(node["key"]), node_demand(node)
        weights.update({path[: i + 1]: w for i, w in enumerate(along)})
    capacity = sum(float(n.get("unified_service") or 0.0) for n in nodes)
    if capacity <= 0:
        return {key: 0.0 for key in keys.values()}
    alloc = hierarchical_fill(demands, weights, capacity)
    return {keys[path]: value / capacity for path, value in alloc.items()}
