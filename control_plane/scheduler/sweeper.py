"""Releasing what a lost gateway replica left behind (run by the scheduler leader only).

A gateway that dies (kill -9, OOM, node lost) can no longer read grants, stream answers or report
completions, so its requests would hold queue places and worker slots forever. Every
`gateway_sweep_interval_s` the leader asks Redis which replicas are lost (registered, and no
heartbeat for `gateway_dead_after_s`, see `GatewayRegistry`); once it has seen one lost for
`confirm_s` (2 heartbeats), it releases each of that replica's requests atomically
(`RequestStore.release_lost`): queued → `withdrawn`, granted → `aborted`, each with one
`complete` event carrying `error = "gateway <id> lost"`, so the recorder writes exactly one
row. The leader's core forgets the request at once: a withdrawn one leaves the policy's queue,
an aborted one frees its worker slot and keeps the tokens charged so far.

Requests of replicas never registered (submitted by a gateway of a version without heartbeats)
are skipped: nothing proves their replica is gone, it may still be serving them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from control_plane.contracts.events import Complete, Sender
from control_plane.contracts.requests import RequestRecord
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.rebuild import job_from_record
from control_plane.state import StateStores

log = logging.getLogger(__name__)

Released = Literal["withdrawn", "aborted"]
_BOTH: Final[tuple[Released, Released]] = ("withdrawn", "aborted")


@dataclass(frozen=True, slots=True)
class Release:
    """One request the sweep ended: its id, its lost gateway and its new status."""

    request_id: str
    gateway: str
    status: Released


def lost_reason(gateway_id: str) -> str:
    """The error text of a request released because its gateway replica is lost."""
    return f"gateway {gateway_id} lost"


def release_event(record: RequestRecord, status: Released, *, n_out: int, now: float) -> Complete:
    """The `complete` event for a released request, shaped like the gateway's own."""
    parsed = job_from_record(record)
    job = parsed[0] if parsed else None
    granted = status == "aborted"
    return Complete(
        id=record.id,
        status=status,
        error=lost_reason(record.gateway),
        gateway_lost=record.gateway or None,
        sender=Sender.of(job) if job else None,
        arrival=job.arrival if job else record.submitted_at,
        dispatched=record.granted_at if granted else None,
        first_token=None,
        finished=now,
        n_in=job.n_in if job else 0,
        n_out=n_out if granted else 0,
        worker=record.worker if granted and record.worker else None,
        attempts=max(0, (record.attempts or 1) - 1),
    )


def tokens_so_far(core: SchedulerCore, request_id: str) -> int:
    """Output tokens already charged for a running request (0 when not running)."""
    run = core.running.get(request_id)
    return run.job.n_out if run else 0


def apply_release(core: SchedulerCore, release: Release, event: Complete, now: float) -> None:
    """Forget a released request: out of the queue, or its worker slot freed (tokens kept)."""
    if release.status == "withdrawn":
        core.withdraw(release.request_id)
    else:
        core.complete(release.request_id, event.outcome(), now)


class GatewaySweeper:
    """One sweep pass per call; see the module docstring for the rule.

    A replica is acted on only once this sweeper has seen it lost for `confirm_s` (on its own
    monotonic clock, so that a step of the wall clock neither skips nor stretches it): after a
    Redis outage every liveness key may have expired at once, and the live replicas need a
    heartbeat to show it. A new sweeper (after a takeover, or after an outage restarts the
    loop) therefore starts by confirming.

    Guarantees: a request is released only while its replica is lost and it is still queued or
    granted, checked atomically in Redis, so a request that is being served (its replica beats
    again, or it already ended) is never released, and none is released twice. A lost replica
    is forgotten (with its grants stream) only after a pass finds nothing of it left, and only
    while its registry score is the one read before its requests: a request it submitted after
    that read (`submit.lua` raises the score of a replica without its liveness key) keeps it
    registered, so that request is released if the replica never beats again.
    """

    def __init__(
        self,
        stores: StateStores,
        *,
        confirm_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stores = stores
        self.confirm_s = confirm_s
        self._clock = clock
        self._lost_since: dict[str, float] = {}

    async def sweep(self, core: SchedulerCore, now: float) -> list[Release]:
        """Release every queued or granted request of a lost replica; returns what changed."""
        scores = await self.stores.gateways.lost_scores()
        lost = self._confirmed(sorted(scores), self._clock())
        if not lost:
            return []
        records = await self.stores.requests.owned_by(lost)
        for gateway_id in set(lost) - {r.gateway for r in records}:
            if await self.stores.gateways.forget(gateway_id, score=scores[gateway_id]):
                log.info("gateway %s lost; nothing of it left, forgotten", gateway_id)
        released = []
        for record in records:
            release = await self._release(core, record, now)
            if release is not None:
                released.append(release)
        return released

    def _confirmed(self, lost: list[str], now: float) -> list[str]:
        """The replicas seen lost continuously for `confirm_s`; forgets the ones seen alive."""
        self._lost_since = {g: self._lost_since.get(g, now) for g in lost}
        return [g for g, since in self._lost_since.items() if now - since >= self.confirm_s]

    async def _release(
        self, core: SchedulerCore, record: RequestRecord, now: float
    ) -> Release | None:
        rid, gateway = record.id, record.gateway
        n_out = tokens_so_far(core, rid)
        events = {status: release_event(record, status, n_out=n_out, now=now) for status in _BOTH}
        status = await self.stores.requests.release_lost(
            rid,
            gateway_id=gateway,
            now=now,
            reason=lost_reason(gateway),
            if_queued=events["withdrawn"],
            if_granted=events["aborted"],
        )
        if status is None:
            return None
        release = Release(rid, gateway, "withdrawn" if status == "withdrawn" else "aborted")
        apply_release(core, release, events[release.status], now)
        log.info("request %s %s: %s", rid, release.status, lost_reason(gateway))
        return release
