"""Which tenants are backlogged (have queued requests), feeding the service-gap tracker.

Service is read from the ledger the dispatcher charges (`service / weight` per tenant), so the
gap measured is the one the policies were given, not a re-derivation of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from control_plane.sim.gap import GapTracker, Matrix

if TYPE_CHECKING:
    from control_plane.sim.setup import SimSetup


class BacklogMonitor:
    """Counts queued requests per tenant; samples weighted service at least every
    `gap_sample_s` of simulated time and at every change of the backlogged set."""

    def __init__(self, setup: SimSetup) -> None:
        tenants = setup.scenario.tenants
        self.names = [t.name for t in tenants]
        self._nodes = [(n,) for n in self.names]
        self._weights = np.array([t.weight for t in tenants], dtype=np.float64)
        self._dispatcher = setup.dispatcher
        self._every = setup.gap_sample_s
        self._last = -np.inf
        self.queued_by: dict[str, int] = dict.fromkeys(self.names, 0)
        self.tracker = GapTracker(self.names)

    def _service(self) -> Matrix:
        ledger = self._dispatcher.policy.ctx.ledger
        return np.array([ledger.service(n) for n in self._nodes]) / self._weights

    def queued(self, tenant: str, delta: int) -> None:
        before = self.queued_by[tenant]
        after = self.queued_by[tenant] = before + delta
        if before == 0 and after > 0:
            self.tracker.join(tenant, self._service())
        elif before > 0 and after == 0:
            self.tracker.leave(tenant, self._service())

    def sample(self, now: float | None = None) -> None:
        if now is not None and now - self._last < self._every:
            return
        if now is not None:
            self._last = now
        self.tracker.sample(self._service())
