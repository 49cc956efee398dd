"""Observers for the service loop: service gaps between backlogged clients, shares."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from control_plane.core.ledger import Node
from tests.control_plane.policies.service_loop import ServiceLoop


@dataclass
class GapTracker:
    """Largest change of `S_a − S_b` (weighted service) while `a` and `b` stay backlogged.

    Over an interval where both are backlogged, the difference of the service they receive is
    `D(t2) − D(t1)` with `D = S_a − S_b`; its largest absolute value is the range of `D`
    over that run of samples. Samples are taken after every event that changes service.
    """

    weights: dict[Node, float]
    level: int = 1
    worst: float = 0.0
    runs: dict[tuple[Node, Node], tuple[float, float]] = field(default_factory=dict)

    def __call__(self, loop: ServiceLoop) -> None:
        ledger = loop.policy.ctx.ledger
        backlogged = loop.backlogged(self.level)
        service = {c: ledger.service(c) / w for c, w in self.weights.items()}
        for a, b in itertools.combinations(sorted(self.weights), 2):
            if a in backlogged and b in backlogged:
                d = service[a] - service[b]
                low, high = self.runs.get((a, b), (d, d))
                low, high = min(low, d), max(high, d)
                self.runs[(a, b)] = (low, high)
                self.worst = max(self.worst, high - low)
            else:
                self.runs.pop((a, b), None)


@dataclass
class ShareMeter:
    """Service each client received while all of them were backlogged (from the first such
    sample to the last)."""

    clients: Sequence[Node]
    level: int = 1
    start: dict[Node, float] | None = None
    end: dict[Node, float] | None = None

    def __call__(self, loop: ServiceLoop) -> None:
        if not set(self.clients) <= loop.backlogged(self.level):
            return
        ledger = loop.policy.ctx.ledger
        now = {c: ledger.service(c) for c in self.clients}
        if self.start is None:
            self.start = now
        self.end = now

    def shares(self) -> dict[Node, float]:
        assert self.start is not None and self.end is not None, "never all backlogged"
        got = {c: self.end[c] - self.start[c] for c in self.clients}
        total = sum(got.values())
        return {c: v / total for c, v in got.items()}
