"""Who is owed what among siblings, and who is starved (pure, no I/O).

`water_fill` is weighted max-min fairness: capacity is poured into the siblings in proportion
to their weights; a sibling that asks less than its weighted share is entitled to exactly its
demand, and what it leaves is shared by the others, again by weight. `judge` turns the
entitlement into the Live page's status flag (the rule is `STATUS_RULE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["starved", "over-served", "ok"]
DEFAULT_TOLERANCE = 0.2
STATUS_RULE = (
    "starved: backlogged (requests waiting now, and the oldest of them or the window's p95 "
    "wait over the wait threshold) and received "
    "< (1 − tolerance) × entitled; over-served: received > (1 + tolerance) × entitled while "
    "a sibling is starved; else ok. Entitled = weighted max-min fair share (water-filling) of "
    "what the siblings received together, given each one's demand."
)


def water_fill(demands: Sequence[float], weights: Sequence[float], capacity: float) -> list[float]:
    """Weighted max-min fair allocation of `capacity` among claimants with these demands.

    Guarantees: every allocation is in [0, demand]; the allocations sum to
    min(capacity, Σ demand); a claimant that gets less than its demand gets at least as much
    per unit weight as any other claimant (no one can gain without taking from someone who
    has less per unit weight). O(n log n).
    """
    if len(demands) != len(weights):
        raise ValueError("demands and weights must have the same length")
    if any(w <= 0 for w in weights):
        raise ValueError("weights must be > 0")
    out = [0.0] * len(demands)
    left, weight_left = max(0.0, capacity), float(sum(weights))
    order = sorted(range(len(demands)), key=lambda i: max(0.0, demands[i]) / weights[i])
    for rank, i in enumerate(order):
        demand = max(0.0, demands[i])
        fair = left * weights[i] / weight_left
        if demand <= fair:
            out[i] = demand
            left -= demand
            weight_left -= weights[i]
            continue
        for j in order[rank:]:  # every one left asks more than its share: split by weight
            out[j] = left * weights[j] / weight_left
        break
    return out


@dataclass(frozen=True, slots=True)
class Claim:
    """One sibling's load over the window: rates in Unified Tokens per second."""

    demand: float
    """Offered: the estimated cost of the requests that arrived."""
    received: float
    """Served: the cost charged to it."""
    weight: float = 1.0
    backlogged: bool = False


@dataclass(frozen=True, slots=True)
class Verdict:
    """A sibling's entitlement (UT/s and share of what the siblings received) and status."""

    entitled: float
    entitled_share: float | None
    received_share: float | None
    status: Status


def judge(siblings: Sequence[Claim], tolerance: float = DEFAULT_TOLERANCE) -> list[Verdict]:
    """The status of each sibling under `STATUS_RULE`, against what they received together.

    A sibling that asks less than its weighted share is entitled to its demand, so a light
    node is `ok` however small its absolute share; only a backlogged node can be starved.
    Shares are None while the siblings received nothing.
    """
    capacity = sum(max(0.0, c.received) for c in siblings)
    entitled = water_fill([c.demand for c in siblings], [c.weight for c in siblings], capacity)
    starved = [
        c.backlogged and c.received < (1 - tolerance) * e
        for c, e in zip(siblings, entitled, strict=True)
    ]
    any_starved = any(starved)
    out = []
    for c, e, is_starved in zip(siblings, entitled, starved, strict=True):
        status: Status = "ok"
        if is_starved:
            status = "starved"
        elif any_starved and c.received > (1 + tolerance) * e:
            status = "over-served"
        out.append(
            Verdict(
                entitled=e,
                entitled_share=e / capacity if capacity > 0 else None,
                received_share=max(0.0, c.received) / capacity if capacity > 0 else None,
                status=status,
            )
        )
    return out
