"""Virtual-counter bookkeeping shared by VTC, WFQ and HMFS (docs/algorithms.md §1–§3, §15.1).

The counters themselves live in the `Ledger`; these functions apply the lift rules to them.
"""

from __future__ import annotations

from collections.abc import Iterable

from control_plane.core.ledger import Ledger, Node


def lift_floor(ledger: Ledger, group: str, backlogged: Iterable[Node]) -> float | None:
    """VTC's lift reference for a node joining `group`.

    The smallest counter among the group's backlogged nodes (given in any order); when none
    is backlogged, the counter of the node whose request left the group's queue last; None on
    a fresh ledger.
    """
    counters = ledger.counters(list(backlogged))
    if counters:
        return min(counters)
    last = ledger.last_left(group)
    return ledger.counter(last) if last is not None else None


def lift_joining(ledger: Ledger, node: Node, group: str, least: float | None) -> None:
    """`node` had nothing queued and just got a request: `c = max(c, floor)`, where the floor
    is `least`, the smallest counter among the group's backlogged nodes (the caller's index
    answers that in O(log n)), or, when none is backlogged (`least` None), the counter of the
    node that left the group last."""
    if least is None:
        last = ledger.last_left(group)
        least = ledger.counter(last) if last is not None else None
    if least is not None:
        ledger.lift(node, least)
    ledger.set_backlogged(node, True)


def lift_adopted(ledger: Ledger, group: str, continuing: set[Node], joining: set[Node]) -> None:
    """A switch or fail-over hands over the pending jobs of `joining` nodes at once.

    Nodes that the ledger still marks as backlogged (a counter policy saw them queued and no
    counter policy has seen them leave) continue with their counters untouched; the others are
    new arrivals and are lifted against the continuing ones, exactly as VTC lifts a client
    that arrives while those are queued.
    """
    kept = continuing | {node for node in joining if ledger.is_backlogged(node)}
    floor = lift_floor(ledger, group, sorted(kept))
    for node in sorted(joining - kept):
        if floor is not None:
            ledger.lift(node, floor)
