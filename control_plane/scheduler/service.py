"""The scheduler process: wait for the lease, rebuild, then lead until the lease is lost.

While leading, independent tasks read arrivals and events (blocking reads), scrape workers,
checkpoint the ledger and the live view, follow knob changes, release the requests of lost
gateway replicas (`sweeper.py`), and dispatch whenever something changed. Every task survives
Redis outages (StateUnavailable → back off → retry); losing the lease cancels them all and the
process returns to standby.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from control_plane.admission.registry import build_admission
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import PolicyParamsError, UnknownPolicyError
from control_plane.recorder.rows import outcome_of
from control_plane.scheduler.core import SchedulerCore
from control_plane.scheduler.leader import keep_lease, wait_for_lease
from control_plane.scheduler.metrics import SchedulerMetrics
from control_plane.scheduler.rebuild import job_from_record, rebuild
from control_plane.scheduler.scrape import scrape
from control_plane.scheduler.sweeper import GatewaySweeper
from control_plane.scheduler.views import live_view
from control_plane.settings import Settings
from control_plane.state import StateStores, StateUnavailable

log = logging.getLogger(__name__)
GROUP = "scheduler"


class SchedulerService:
    """One scheduler replica (leader or standby)."""

    def __init__(
        self,
        settings: Settings,
        stores: StateStores,
        holder: str,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.holder = holder
        self.http = http or httpx.AsyncClient(timeout=2.0)
        self.metrics = SchedulerMetrics()
        self.core: SchedulerCore | None = None
        self.leading = False
        self.fencing_token: int | None = None
        self._dirty = asyncio.Event()

    async def run(self) -> None:
        """Forever: standby → leader → standby (after losing the lease)."""
        while True:
            await wait_for_lease(self.stores.lease, self.holder, self.settings.lease_ttl_s)
            try:
                await self._lead()
            except StateUnavailable:
                log.warning("Redis unavailable while leading; back to standby")
            finally:
                self.leading = False
                self.metrics.leader.set(0)
            await asyncio.sleep(self.settings.lease_ttl_s / 4)

    async def _lead(self) -> None:
        await self.stores.events.ensure_groups()
        await self.stores.arrivals.ensure_group()
        self.fencing_token = await self.stores.lease.current_token()
        known = {w["id"] for w in await self.stores.workers.list()}
        for rec in self.settings.static_workers():
            if rec["id"] not in known:  # never overwrite an operator's drain
                await self.stores.workers.upsert(rec)
        now = time.time()
        self.core = await rebuild(
            self.stores, self.settings.policy, now, self.settings.worker_failure_cooldown_s
        )
        await self._claim_orphan_events()
        self.leading = True
        self.metrics.leader.set(1)
        self._dirty.set()
        loops: list[Callable[[], Awaitable[None]]] = [
            self._arrivals_loop,
            self._events_loop,
            self._dispatch_loop,
            self._scrape_loop,
            self._checkpoint_loop,
            self._knobs_loop,
            self._tick_loop,
            self._sweep_loop,
        ]
        tasks = [asyncio.create_task(_resilient(fn)) for fn in loops]
        lease = asyncio.create_task(
            keep_lease(self.stores.lease, self.holder, self.settings.lease_ttl_s)
        )
        try:
            await asyncio.wait([lease, *tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in [lease, *tasks]:
                task.cancel()
            await asyncio.gather(lease, *tasks, return_exceptions=True)

    # -- inputs -----------------------------------------------------------------------------
    async def _arrivals_loop(self) -> None:
        while True:
            arrivals = await self.stores.arrivals.read_entries(
                self.holder, count=512, block_ms=1000
            )
            if not arrivals:
                continue
            # first submissions carry their envelope; re-queues are read from their hash
            records = [
                {"envelope": a.envelope, "seq": a.seq, "status": "queued"}
                for a in arrivals
                if a.envelope is not None
            ]
            requeued = [a.id for a in arrivals if a.envelope is None]
            now = time.time()
            if requeued:
                again = await self.stores.requests.load_many(requeued)
                for record in again:  # the worker that failed it, atomically with the requeue
                    if record.get("prev_worker"):
                        self._core.worker_failed(str(record["prev_worker"]), now)
                records += again
            for record in records:
                if record.get("status") != "queued":
                    continue
                parsed = job_from_record(record)
                if parsed is not None:
                    self._core.arrive(parsed[0], parsed[1], now)
            self.metrics.arrivals.inc(len(records))
            self._dirty.set()

    async def _events_loop(self) -> None:
        while True:
            entries = await self.stores.events.read(GROUP, self.holder, count=1024, block_ms=1000)
            if entries:
                self._apply_events(entries)
                await self.stores.events.ack(GROUP, [eid for eid, _ in entries])
                self._dirty.set()

    async def _claim_orphan_events(self) -> None:
        """Events a dead leader read but never acknowledged are applied now."""
        mine = await self.stores.events.pending_for(GROUP, self.holder)
        theirs = await self.stores.events.claim(GROUP, self.holder, min_idle_ms=0, count=100_000)
        entries = mine + theirs
        self._apply_events(entries)
        await self.stores.events.ack(GROUP, [eid for eid, _ in entries])

    def _apply_events(self, entries: list[tuple[str, dict[str, Any]]]) -> None:
        core, now = self._core, time.time()
        for _, event in entries:
            kind, rid = event.get("type"), str(event.get("id", ""))
            if kind == "progress":
                core.progress(rid, int(event.get("n_out") or 0), now)
            elif kind == "complete":
                if core.complete(rid, outcome_of(event), now) is not None:
                    self.metrics.completed.labels(str(event.get("status"))).inc()
            elif kind == "withdrawn":
                core.withdraw(rid)
            elif kind == "worker_failed" and event.get("worker"):
                core.worker_failed(str(event["worker"]), now)

    # -- decisions --------------------------------------------------------------------------
    async def _dispatch_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dirty.wait(), timeout=0.05)
            self._dirty.clear()
            started = time.perf_counter()
            decisions = self._core.decide(time.time())
            for decision in decisions:
                granted = await self.stores.requests.grant(
                    decision.job.id,
                    worker_id=decision.worker.id,
                    worker_url=decision.worker.url,
                    now=time.time(),
                )
                if granted:
                    self.metrics.dispatched.labels(decision.worker.id).inc()
                else:
                    self._core.undo(decision)
            if decisions:
                self.metrics.decide_seconds.observe(time.perf_counter() - started)

    async def _scrape_loop(self) -> None:
        while True:
            self._core.set_workers(await self.stores.workers.list())
            states = list(self._core.workers.items())
            samples = await asyncio.gather(
                *(scrape(self.http, str(s.record["url"])) for _, s in states)
            )
            now = time.time()
            for (worker_id, _), sample in zip(states, samples, strict=True):
                self._core.observe(worker_id, sample)
                await self.stores.workers.set_metrics(worker_id, sample.to_json(), now)
            self._dirty.set()
            await asyncio.sleep(self.settings.scrape_interval_s)

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.checkpoint_interval_s)
            await self.checkpoint()

    async def checkpoint(self) -> None:
        core, now = self._core, time.time()
        ledger = {
            "ledger": core.ctx.ledger.snapshot(),
            "dispatcher": core.dispatcher.snapshot(),
            "running_n_out": {i: r.job.n_out for i, r in core.running.items()},
        }
        saved = await self.stores.checkpoints.save(
            "ledger", ledger, fencing_token=self.fencing_token
        )
        if not saved:
            raise StateUnavailable("fencing token is stale: another scheduler leads")
        await self.stores.checkpoints.save(
            "live", live_view(core, self.holder, now), fencing_token=self.fencing_token
        )
        self.metrics.queue_depth.set(len(core.pending))
        self.metrics.inflight.set(len(core.running))

    async def _knobs_loop(self) -> None:
        subscription = await self.stores.knobs.subscribe()
        async with subscription:
            # catch up with changes made while we were not subscribed
            for name, value in (await self.stores.knobs.get_all()).items():
                self.apply_knob(name, value)
            async for change in subscription:
                self.apply_knob(str(change["name"]), change["value"])
                self._dirty.set()

    def apply_knob(self, name: str, value: Any) -> None:
        core, now = self._core, time.time()
        if name == "policy" and isinstance(value, dict):
            current = core.dispatcher.policy
            same_params = (value.get("params") or {}) == current.params.model_dump()
            if current.name == value.get("name") and same_params:
                return
            try:
                core.switch_policy(str(value["name"]), value.get("params"), now)
                log.info("policy switched to %s", value["name"])
            except (UnknownPolicyError, PolicyParamsError, KeyError):
                log.exception("ignoring invalid policy knob %r", value)
        elif name in ("admission", "placement") and isinstance(value, dict):
            self._swap_plugin(name, value)
        elif name == "weights" and isinstance(value, dict):
            for node, weight in value.items():
                core.ctx.weights.set(tuple(str(node).split("/")), float(weight))

    def _swap_plugin(self, kind: str, value: dict[str, Any]) -> None:
        """Replace admission or placement live; the policy and its queue are untouched."""
        dispatcher = self._core.dispatcher
        try:
            if kind == "admission":
                dispatcher.admission = build_admission(str(value["name"]), value.get("params"))
            else:
                dispatcher.placement = build_placement(str(value["name"]), value.get("params"))
            log.info("%s switched to %s", kind, value["name"])
        except (ValueError, KeyError):
            log.exception("ignoring invalid %s knob %r", kind, value)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tick_interval_s)
            self._core.tick(time.time())

    async def _sweep_loop(self) -> None:
        """Release what lost gateway replicas left; the first pass runs right after rebuild.
        An outage restarts this loop (`_resilient`), so the sweeper confirms losses afresh."""
        sweeper = GatewaySweeper(self.stores, confirm_s=2 * self.settings.gateway_heartbeat_s)
        while True:
            released = await sweeper.sweep(self._core, time.time())
            for release in released:
                self.metrics.completed.labels(release.status).inc()
            if released:
                lost = sorted({r.gateway for r in released})
                log.warning("released %d requests of lost gateways %s", len(released), lost)
                self._dirty.set()
            await asyncio.sleep(self.settings.gateway_sweep_interval_s)

    @property
    def _core(self) -> SchedulerCore:
        assert self.core is not None, "not leading"
        return self.core


async def _resilient(fn: Callable[[], Awaitable[None]]) -> None:
    """Run a leader task; on Redis outages wait and restart it (nothing crashes)."""
    backoff = 0.1
    while True:
        try:
            await fn()
            return
        except StateUnavailable as exc:
            log.warning("%s: Redis unavailable (%s); retrying in %.1fs", fn.__name__, exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
