"""Which tenants are backlogged (have queued requests), feeding the service-gap tracker.

Service is read from the ledger the dispatcher charges (`service / weight` per tenant), so the
gap measured is the one the policies were given, not a re-derivation of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from control_plane.core.ledger import Ledger
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
        self._sampled: tuple[Ledger, int] | None = None
        """The ledger and its revision at the last tracker sample."""
        self._read: tuple[tuple[Ledger, int], Matrix] | None = None
        """The last service vector read, with the ledger and revision it was read at."""
        self.queued_by: dict[str, int] = dict.fromkeys(self.names, 0)
        self.tracker = GapTracker(self.names)

    def _service(self) -> Matrix:
        """Weighted service per tenant, read again only once the ledger has been charged."""
        ledger = self._dispatcher.policy.ctx.ledger
        stamp = (ledger, ledger.revision)
        if self._read is None or self._read[0] != stamp:
            service = np.array(ledger.services(self._nodes), dtype=np.float64) / self._weights
            self._read = (stamp, service)
        return self._read[1]

    def queued(self, tenant: str, delta: int) -> None:
        before = self.queued_by[tenant]
        after = self.queued_by[tenant] = before + delta
        if before == 0 and after > 0:
            self.tracker.join(tenant, self._service())
        elif before > 0 and after == 0:
            self.tracker.leave(tenant, self._service())

    def sample(self, now: float | None = None) -> None:
        """Fold the current service into the tracker (at most every `gap_sample_s`).

        A sample taken when the ledger has not been charged since the previous one is skipped:
        with the same service vector it cannot move any pair's range (joins and leaves in
        between take their own samples of that same vector).
        """
        if now is not None and now - self._last < self._every:
            return
        if now is not None:
            self._last = now
        ledger = self._dispatcher.policy.ctx.ledger
        if self._sampled == (ledger, ledger.revision):
            return
        self._sampled = (ledger, ledger.revision)
        self.tracker.sample(self._service())
