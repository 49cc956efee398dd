"""Submitting an accepted request: queued for the scheduler, or granted on the fast lane.

Rule: the request's grant future is registered before the submit script runs, so a grant
can never arrive for a request the grant reader does not know yet (architecture.md §2,
invariant 1). The script tries the fast lane first: when nothing of the request's model is
queued and the leader has lent a slot of one of its workers, the script grants it at once
and the future is resolved here with that grant — no scheduler round trip. Otherwise the
request is queued, unless its tenant already has its cap queued (429 `queue_full`).
A waiting request that Redis no longer knows is submitted again (`resubmit_if_lost`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from control_plane.contracts.grants import Grant
from control_plane.contracts.requests import Envelope
from control_plane.gateway.bounds import INT32_MAX
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.errors import ApiError
from control_plane.gateway.flight import Flight
from control_plane.gateway.grants import GrantWaiter
from control_plane.state import FINAL_STATUSES
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
ENDED = FINAL_STATUSES | {"withdrawn"}
"""Statuses of a request that has ended (`withdrawn`: left the queue unserved)."""


async def submit_flight(
    d: GatewayDeps,
    waiter: GrantWaiter,
    flight: Flight,
    abandon: Callable[[str, Envelope], None],
) -> None:
    """Store `flight` in Redis (queued, or granted on the fast lane); raises the 429. When the
    submit call raises, Redis may still have run it (or may run it later): `abandon` is handed
    the id and envelope so that what it did is undone off the response path
    (`gateway/abandon.py`)."""
    fut = waiter.expect(flight.id)
    flight.grant_future = fut
    flight.liveness_epoch = d.liveness.epoch
    # a copy: the envelope is what was submitted, whatever the flight's job becomes later
    envelope = Envelope(replace(flight.job), flight.node.weights(), d.gateway_id)
    flight.envelope = envelope
    cap = flight.node.tenant.queue_cap or d.knobs.queue_cap_default or d.settings.default_queue_cap
    try:
        result = await d.requests.submit(
            envelope,
            request_id=flight.id,
            tenant=flight.job.tenant,
            gateway_id=d.gateway_id,
            queue_cap=cap,
            now=time.time(),
            fast=flight.job.min_context is None,  # the lane's worker may be too short
        )
    except BaseException:
        waiter.forget(flight.id)
        abandon(flight.id, envelope)
        if fut.done() and not fut.cancelled():
            # the reader read the leader's grant before the submit's reply was lost: nobody
            # will await it, so it is released (with its row: the abandoner kept the envelope)
            waiter.unwaited(fut.result())
        raise
    flight.submitted_at = time.time()
    if result.grant is not None:
        waiter.forget(flight.id)
        flight.grant_future = _granted(result.grant)
        flight.fast = True
        return
    if not result.accepted:
        waiter.forget(flight.id)
        d.metrics.refused("queue_full")
        raise ApiError(
            429,
            f"Tenant {flight.job.tenant!r} has {result.depth} requests queued "
            f"(cap {cap}); retry later.",
            code="queue_full",
            headers={"Retry-After": "1"},
        )


def _granted(grant: Grant) -> asyncio.Future[Grant]:
    fut: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
    fut.set_result(grant)
    return fut


async def resubmit_if_lost(d: GatewayDeps, flight: Flight) -> bool:
    """Submit a waiting request again when Redis no longer knows it (a restarted Redis
    lost the last writes before it died). Safe: with no record there is no grant either
    (a grant and its record change in one script), and only this gateway contacts a
    worker for it. Its place in the queue is lost; outages are left to the leader watch.
    → True when the request has ended meanwhile (the leader released it, this replica
    having been considered lost), even once its ended hash expired (its release's tombstone
    is there): the wait is over, and submitting it again would serve a
    request whose row says it never was."""
    try:
        status = await d.requests.status(flight.id)
        if status in ENDED:
            return True
        if status is not None or flight.envelope is None:
            return False
        if await _expired_after_its_end(d, flight):
            return True
        await d.requests.submit(
            flight.envelope,
            request_id=flight.id,
            tenant=flight.job.tenant,
            gateway_id=d.gateway_id,
            queue_cap=INT32_MAX,  # accepted once already: the door's cap does not apply
            now=time.time(),
        )
    except StateUnavailable:
        return False
    log.warning("request %s was lost by Redis while queued; submitted again", flight.id)
    return False


async def _expired_after_its_end(d: GatewayDeps, flight: Flight) -> bool:
    """True when the leader released `flight` as a lost replica's (its tombstone, written in the
    same script, `release_lost.lua`) and its ended hash has expired since (a minute after its
    row was recorded), not when Redis lost it: a restart that lost only the last writes (AOF
    `everysec` after a machine crash, a fail-over) lost its submit, and no end of it was ever
    recorded."""
    if not d.liveness.suspect(flight.liveness_epoch):
        return False
    return await d.requests.released(flight.id)
