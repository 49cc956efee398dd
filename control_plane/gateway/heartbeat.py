"""A gateway replica's heartbeat: how the scheduler leader tells a live replica from a lost one.

Rule: beat every `gateway_heartbeat_s`; each beat keeps the replica alive for
`gateway_dead_after_s` (≥ 3 beats). Redis outages are ridden out (the next beat retries); a
replica that finds it had been considered lost logs it, because its queued and granted requests
may have been released by the leader meanwhile. On clean shutdown the app calls `leave`.
"""

from __future__ import annotations

import asyncio
import logging
import time

from control_plane.state import GatewayRegistry, StateUnavailable

log = logging.getLogger(__name__)


async def beat_once(registry: GatewayRegistry, gateway_id: str, dead_after_s: float) -> bool:
    """One beat; False when Redis could not be reached (the replica may look lost)."""
    try:
        was_alive = await registry.beat(gateway_id, ttl_s=dead_after_s, now=time.time())
    except StateUnavailable as exc:
        log.warning("gateway %s: heartbeat failed (%s)", gateway_id, exc)
        return False
    if not was_alive:
        log.info("gateway %s: alive (first beat, or after being considered lost)", gateway_id)
    return True


async def run_heartbeat(
    registry: GatewayRegistry, gateway_id: str, interval_s: float, dead_after_s: float
) -> None:
    """Beat until cancelled."""
    while True:
        await beat_once(registry, gateway_id, dead_after_s)
        await asyncio.sleep(interval_s)


async def leave(registry: GatewayRegistry, gateway_id: str) -> None:
    """Clean shutdown: mark the replica lost now (anything it left is released promptly)."""
    try:
        await registry.leave(gateway_id)
    except StateUnavailable:
        log.warning("gateway %s: could not leave; its liveness expires on its own", gateway_id)
