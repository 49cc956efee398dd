"""ExFairS credit exchange, Algorithm 1 (docs/algorithms.md §4.2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from control_plane.core.ledger import Ledger, Node


@dataclass(frozen=True, slots=True)
class Transfer:
    """`amount` resource moved from `giver` (low SAFI) to `taker` (high SAFI), paid in credit."""

    taker: Node
    giver: Node
    amount: int
    gap: float


def exchange_credits(
    ledger: Ledger, safi: dict[Node, float], beta: float, scale: float, bound: int
) -> list[Transfer]:
    """One round over the active clients in `safi`; accounts live in the ledger.

    Sort by SAFI descending, then credit descending (then node, for a total order); pair the
    ends moving inward; while `SAFI_H − SAFI_L ≥ β` move `R = round(scale · Δ)` (half up) of
    resource from L to H and as much credit from H to L. `R` is clipped so that no resource
    or credit leaves `[−bound, bound]`. Invariants: each transfer leaves both the sum of
    credits and the sum of resources unchanged, and every client's `credit + resource`.
    """
    order = sorted(safi, key=lambda c: (-safi[c], -ledger.account(c).credit, c))
    transfers: list[Transfer] = []
    head, tail = 0, len(order) - 1
    while head < tail:
        high, low = order[head], order[tail]
        gap = safi[high] - safi[low]
        if gap < beta:
            break
        h, lo = ledger.account(high), ledger.account(low)
        amount = math.floor(scale * gap + 0.5)
        amount = min(amount, bound - h.resource, bound + h.credit, bound + lo.resource)
        amount = max(0, min(amount, bound - lo.credit))
        if amount > 0:
            h.credit -= amount
            h.resource += amount
            lo.credit += amount
            lo.resource -= amount
            transfers.append(Transfer(high, low, amount, gap))
        head += 1
        tail -= 1
    return transfers
