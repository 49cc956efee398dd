"""What each report node is entitled to by weight alone, down the hierarchy (pure, no I/O).

The rule is HMFS's (docs/algorithms.md §3): a parent's share is split among its children by
their weights. A report only sees the nodes that had requests in its period, and it splits
among those: at every depth a node's part of its parent is its weight over the summed weights
of its siblings present in the report, and its entitled share is the product of those parts
from its tenant down. So at tenant level it is `weight / Σ weights` of the report's tenants,
and an application is never entitled to more because its tenant has fewer applications.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from storage.records import TenantNode

Path = tuple[str, ...]
DEFAULT_WEIGHT = 1.0
"""The weight of a node missing from the configured hierarchy (deleted since, or never
configured): what `storage.reports` gives it, and what nodes created on first use get."""


def hierarchy_weights(tree: Iterable[TenantNode]) -> dict[Path, float]:
    """The configured weight of every tenant, application and agent, keyed by its path."""
    weights: dict[Path, float] = {}
    for tn in tree:
        weights[(tn.tenant.name,)] = tn.tenant.weight
        for an in tn.apps:
            weights[(tn.tenant.name, an.app.name)] = an.app.weight
            for agent in an.agents:
                weights[(tn.tenant.name, an.app.name, agent.name)] = agent.weight
    return weights


def path_weights(weights: Mapping[Path, float], path: Sequence[str]) -> list[float]:
    """The weights along `path` from its tenant down to the node, `DEFAULT_WEIGHT` where a
    node of it is not configured."""
    return [weights.get(tuple(path[: depth + 1]), DEFAULT_WEIGHT) for depth in range(len(path))]


def weight_shares(nodes: Mapping[Path, Sequence[float]]) -> dict[Path, float]:
    """Each node's (path → its `path_weights`) hierarchical entitled share by weight.

    Guarantees: the shares of the nodes under any one present parent sum to that parent's
    share (all of them to 1); at the top level a share is `weight / Σ weights` exactly; a
    node whose siblings all weigh 0 gets 0.
    """
    prefix_weight: dict[Path, float] = {}
    for path, weights in nodes.items():
        for depth in range(len(path)):
            prefix_weight[path[: depth + 1]] = weights[depth]
    siblings: dict[Path, float] = {}
    for prefix, weight in prefix_weight.items():
        siblings[prefix[:-1]] = siblings.get(prefix[:-1], 0.0) + weight
    shares: dict[Path, float] = {}
    for path in nodes:
        share = 1.0
        for depth in range(1, len(path) + 1):
            total = siblings[path[: depth - 1]]
            share *= prefix_weight[path[:depth]] / total if total > 0 else 0.0
        shares[path] = share
    return shares
