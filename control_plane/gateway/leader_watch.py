"""Whether a gateway replica can expect grants: a scheduler leader leads and Redis answers.

Rule: every `interval_s` the watch reads the lease holder (bounded by `probe_timeout_s`); a
holder seen means a leader leads (its key expires one TTL after its last renewal). `down` is
set once no holder has been seen for `bound_s` (Redis not answering counts as no holder) and
cleared by the next sighting. Guarantee: `down` is set at most `bound_s + interval_s +
probe_timeout_s` after the last sighting, so a request waiting on it never waits forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)


class HolderSource(Protocol):
    async def holder(self) -> str | None: ...


class LeaderWatch:
    """Tracks the last time a scheduler leader was seen holding the lease."""

    def __init__(
        self,
        lease: HolderSource,
        bound_s: float,
        *,
        interval_s: float = 0.25,
        probe_timeout_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lease = lease
        self.bound_s = bound_s
        self._interval_s = interval_s
        self._probe_timeout_s = probe_timeout_s
        self._clock = clock
        self.last_seen = clock()
        """Monotonic time of the last sighting (start-up counts as one: a grace period)."""
        self.holder: str | None = None
        self.reason = "not probed yet"
        self.down = asyncio.Event()

    def seconds_without_leader(self) -> float:
        return 0.0 if self.holder is not None else self._clock() - self.last_seen

    async def probe(self) -> bool:
        """One bounded look at the lease; True when a leader holds it."""
        try:
            async with asyncio.timeout(self._probe_timeout_s):
                holder = await self._lease.holder()
        except (StateUnavailable, TimeoutError) as exc:
            holder, self.reason = None, f"redis unavailable: {exc or 'no answer'}"
        else:
            self.reason = "leader" if holder is not None else "no leader holds the lease"
        self.holder = holder
        now = self._clock()
        if holder is not None:
            self.last_seen = now
            if self.down.is_set():
                log.info("scheduler leader %s leads again; accepting requests", holder)
            self.down.clear()
        elif now - self.last_seen >= self.bound_s and not self.down.is_set():
            log.error(
                "no scheduler leader for %.1fs (%s): answering 503", self.bound_s, self.reason
            )
            self.down.set()
        return holder is not None

    async def run(self) -> None:
        """Probe until cancelled."""
        while True:
            await self.probe()
            await asyncio.sleep(self._interval_s)

    def status(self) -> dict[str, Any]:
        """For readiness probes: who leads, and for how long nobody has."""
        return {
            "leader": self.holder,
            "leader_state": self.reason,
            "seconds_without_leader": round(self.seconds_without_leader(), 3),
        }
