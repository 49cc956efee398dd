"""A gateway replica's heartbeat: how the scheduler leader tells a live replica from a lost one.

Rule: beat every `gateway_heartbeat_s`; each beat keeps the replica alive for
`gateway_dead_after_s` (≥ 3 beats). Redis outages are ridden out (the next beat retries); a
replica that finds it had been considered lost logs it, because its queued and granted requests
may have been released by the leader meanwhile. `Liveness` says when that may have happened, so
that a grant read after it is checked before its worker is opened. On clean shutdown the app
calls `leave`.
"""

from __future__ import annotations

import asyncio
import logging
import time

from control_plane.state import GatewayRegistry, StateUnavailable

log = logging.getLogger(__name__)


class Liveness:
    """What this replica knows of its own liveness in Redis: whether the leader may have
    considered it lost — and released its queued and granted requests — since a request was
    submitted. Guarantee: `suspect(epoch)` is True whenever that may have happened since
    `epoch` was read: a beat found the replica had been considered lost, two answered beats
    were `dead_after_s` or more apart, or none has been answered for `dead_after_s` (a stall
    or a partition: its liveness may have expired)."""

    def __init__(self, dead_after_s: float) -> None:
        self.dead_after_s = dead_after_s
        self.epoch = 0
        """Bumped by each answered beat that finds the replica had been considered lost, or
        that comes `dead_after_s` or more after the previous answered one."""
        self._beat_at: float | None = None
        """When (monotonic) the last answered beat was sent."""

    def beaten(self, sent_at: float, was_alive: bool) -> None:
        last = self._beat_at
        # it was lost (also on the first answered beat: a submit before it registered the
        # replica, submit.lua, so the leader may have released that request); or it may have
        # been, between two answered beats that far apart (the one that registered it again
        # may have lost its reply)
        if not was_alive or (last is not None and sent_at - last >= self.dead_after_s):
            self.epoch += 1
        self._beat_at = sent_at

    def suspect(self, epoch: int) -> bool:
        if self._beat_at is None:  # no beat answered yet: a submit registered it (submit.lua),
            return True  # and the leader may have found it lost since
        return epoch != self.epoch or time.monotonic() - self._beat_at >= self.dead_after_s


async def beat_once(
    registry: GatewayRegistry,
    gateway_id: str,
    dead_after_s: float,
    liveness: Liveness | None = None,
) -> bool:
    """One beat; False when Redis could not be reached (the replica may look lost)."""
    sent_at = time.monotonic()
    try:
        was_alive = await registry.beat(gateway_id, ttl_s=dead_after_s, now=time.time())
    except StateUnavailable as exc:
        log.warning("gateway %s: heartbeat failed (%s)", gateway_id, exc)
        return False
    if not was_alive:
        log.info("gateway %s: alive (first beat, or after being considered lost)", gateway_id)
    if liveness is not None:
        liveness.beaten(sent_at, was_alive)
    return True


async def run_heartbeat(
    registry: GatewayRegistry,
    gateway_id: str,
    interval_s: float,
    dead_after_s: float,
    liveness: Liveness | None = None,
) -> None:
    """Beat until cancelled."""
    while True:
        await beat_once(registry, gateway_id, dead_after_s, liveness)
        await asyncio.sleep(interval_s)


async def leave(registry: GatewayRegistry, gateway_id: str) -> None:
    """Clean shutdown: mark the replica lost now (anything it left is released promptly)."""
    try:
        await registry.leave(gateway_id)
    except StateUnavailable:
        log.warning("gateway %s: could not leave; its liveness expires on its own", gateway_id)
