"""The scheduler process: wait for the lease, rebuild, then lead until the lease is lost.

While leading, independent tasks read arrivals and events (blocking reads), scrape workers,
checkpoint the ledger and the live view, follow knob changes, release the requests of lost
gateway replicas (`sweeper.py`), end those whose completion never reached the leader
(`slot_audit.py`), and dispatch whenever something changed (`granting.py`). Every task survives
Redis outages (StateUnavailable → back off → retry); losing the lease cancels them all and the
process returns to standby. The replica acts (grants, sweeps) only while its `LeaderTerm` is
active, which ends before its lease can expire in Redis, so a deposed leader has stopped before
a new one starts; `_lead` returns only once every task of the term has ended (`stop_tasks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import aiohttp
import httpx

from control_plane.contracts.checkpoints import LeaderState
from control_plane.contracts.events import Complete, Event, encode
from control_plane.contracts.knobs import KnobValue
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.advisor import Advisor
from control_plane.scheduler.autopilot import after_tick, controller_snapshot
from control_plane.scheduler.configured import reconcile
from control_plane.scheduler.entries import apply_each, apply_event, dead_letter_all
from control_plane.scheduler.fairness_view import DEFAULT_SAFI_ALPHA, node_fairness
from control_plane.scheduler.granting import grant
from control_plane.scheduler.history import HistoryTap
from control_plane.scheduler.intake import ArrivalsIntake
from control_plane.scheduler.knob_changes import apply_knob
from control_plane.scheduler.leader import LeaderTerm, keep_lease, wait_for_lease
from control_plane.scheduler.lending import LendingDesk, open_desk
from control_plane.scheduler.metrics import SchedulerMetrics, Snapshot
from control_plane.scheduler.orphans import disown_charged
from control_plane.scheduler.pacing import EventPacer
from control_plane.scheduler.rebuild import rebuild
from control_plane.scheduler.scrape import scrape_or_unhealthy
from control_plane.scheduler.slot_audit import SlotAudit, newest
from control_plane.scheduler.sweeper import GatewaySweeper
from control_plane.scheduler.views import live_view
from control_plane.scheduler.workers import observe, sync_workers
from control_plane.settings import Settings
from control_plane.state import StateStores, StateUnavailable, server_run_id
from control_plane.state.inflight_view import NO_ENTRY
from control_plane.state.tasks import stop_tasks

log = logging.getLogger(__name__)
GROUP = "scheduler"
TRIM_INTERVAL_S = 5.0
REDIS_RESTART_CHECK_S = 0.5


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
        self.advisor = Advisor(self.http)
        self.metrics = SchedulerMetrics()
        self.core: SchedulerCore | None = None
        self.desk: LendingDesk | None = None
        self.term: LeaderTerm | None = None
        """The current tenure; the replica acts as leader only while it is active."""
        self._serving = False
        self._dirty = asyncio.Event()
        self._redis_run_id = ""
        self._history = HistoryTap()
        self._applied: list[str] = []
        self._lost_read = False
        """Events applied and not yet acknowledged (acknowledged with the next read)."""
        self._applied_to = NO_ENTRY
        """The events-stream id this term's core reflects (what `SlotAudit.run` needs)."""
        self._pacer = EventPacer(settings.leader_events_gap_s)
        self._deciding = asyncio.Lock()
        """Held from a cycle's decisions until their grants are written (see `take_in`)."""
        self._intake = ArrivalsIntake(stores, NO_ENTRY)
        """This term's reader of `arrivals` (replaced on every takeover)."""

    @property
    def leading(self) -> bool:
        """True while this replica holds a valid lease and has rebuilt its state."""
        return self._serving and self.term is not None and self.term.active()

    @property
    def fencing_token(self) -> int | None:
        return None if self.term is None else self.term.token

    async def run(self) -> None:
        """Forever: standby → leader → standby (after losing the lease)."""
        while True:
            term = await wait_for_lease(self.stores.lease, self.holder, self.settings.lease_ttl_s)
            self.term = term
            try:
                await self._lead(term)
            except StateUnavailable:
                log.warning("Redis unavailable while leading; back to standby")
            finally:
                term.end()
                self._serving = False
                self.metrics.leader.set(0)
            await asyncio.sleep(self.settings.lease_ttl_s / 4)

    async def _lead(self, term: LeaderTerm) -> None:
        """Lead until the term ends; every task of the term has ended when this returns.

        The lease is renewed from the start, so a long rebuild cannot let it expire.
        """
        keeper = asyncio.create_task(keep_lease(self.stores.lease, self.holder, term))
        tasks: list[asyncio.Task[None]] = [keeper]
        try:
            setup = asyncio.create_task(self._take_over())
            tasks.append(setup)
            await asyncio.wait([keeper, setup], return_when=asyncio.FIRST_COMPLETED)
            if not setup.done() or not term.active():
                return
            setup.result()  # a setup that failed (Redis down) ends the term here
            loops = [asyncio.create_task(_resilient(fn, term)) for fn in self._loops()]
            tasks += loops
            self._serving = True
            self.metrics.leader.set(1)
            self.metrics.fairness.serve(self._fairness)
            self._dirty.set()
            await asyncio.wait([keeper, *loops], return_when=asyncio.FIRST_COMPLETED)
        finally:
            term.end()
            self._serving = False
            self.metrics.stop_leading()
            await stop_tasks(tasks)
            await self.advisor.close()

    async def _take_over(self) -> None:
        self._redis_run_id = await server_run_id(self.stores.redis)
        await self.stores.events.ensure_groups()
        await self.stores.arrivals.ensure_group()
        applied = await self.stores.arrivals.delivered()  # before the view: nothing is missed
        await reconcile(self.stores, self.settings.static_workers(), f"scheduler:{self.holder}")
        assert self.term is not None  # no slot stays lent before `inflight` is read:
        self.desk = await open_desk(self.stores.lending, self.term.token, self.settings)
        now = time.time()
        rebuilt = await rebuild(
            self.stores, self.settings.policy, now, self.settings.worker_failure_cooldown_s
        )
        self.core = rebuilt.core
        self._intake = ArrivalsIntake(self.stores, rebuilt.arrivals_tail, applied)
        await self._claim_orphan_events(rebuilt.events_checkpointed)
        self._applied_to = await self.stores.inflight.delivered(GROUP)

    def _loops(self) -> list[Callable[[], Awaitable[None]]]:
        return [
            self._arrivals_loop,
            self._events_loop,
            self._dispatch_loop,
            self._scrape_loop,
            self._checkpoint_loop,
            self._knobs_loop,
            self._tick_loop,
            self._sweep_loop,
            self._trim_loop,
            self._redis_restart_loop,
            self.metrics.dead_letters.follower(self.stores.dead_letters),
        ]

    # -- inputs -----------------------------------------------------------------------------
    async def _arrivals_loop(self) -> None:
        while True:
            taken = await self._intake.step(self._core, self._desk, self._deciding)
            if taken is not None:
                self.metrics.arrivals.inc(taken.announced)
                self._dirty.set()
                if self._core.pending:
                    self._pacer.wake()

    async def _events_loop(self) -> None:
        while True:
            if self._lost_read:
                await self._apply_mine()
            # what was applied is acknowledged with the next read (one round trip a batch);
            # kept on the service, so a read that fails acknowledges it on the retry
            try:
                entries = await self.stores.events.read(
                    GROUP, self.holder, count=1024, block_ms=1000, ack=self._applied
                )
            except StateUnavailable:
                self._lost_read = True  # it may have run in Redis, its reply lost
                raise
            self._applied = []
            if entries:
                await self._apply_events(entries)
                self._applied = [eid for eid, _ in entries]
                self._dirty.set()
                await self._pacer.pause(bool(self._core.pending))

    async def _apply_mine(self) -> None:
        """Events delivered to this leader by a read whose reply was lost (else seen only at
        the next takeover): applied now, after acknowledging those already applied."""
        await self.stores.events.ack(GROUP, self._applied)
        self._applied = []
        while mine := await self.stores.events.pending_for(GROUP, self.holder, count=1024):
            await self._apply_events(mine)
            await self.stores.events.ack(GROUP, [eid for eid, _ in mine])
        self._lost_read = False

    async def _claim_orphan_events(self, checkpointed: str) -> None:
        """Events a dead leader read but never acknowledged are applied now — but a completion
        its checkpoint already reflects only frees its slot (`orphans.py`)."""
        mine = await self.stores.events.pending_for(GROUP, self.holder)
        theirs = await self.stores.events.claim(GROUP, self.holder, min_idle_ms=0, count=100_000)
        entries = mine + theirs
        await self._apply_events(disown_charged(self._core, entries, checkpointed))
        await self.stores.events.ack(GROUP, [eid for eid, _ in entries])
        await self.stores.events.forget_consumers(GROUP, idle_ms=0, keep=self.holder)
        self._applied = []  # a previous term's: re-applied above, as "mine"

    async def _apply_events(self, entries: list[tuple[str, Event]]) -> None:
        """Apply each event; one that cannot be applied is dead-lettered and skipped."""
        now = time.time()
        failed = apply_each(entries, lambda event: self._apply_event(event, now), encode)
        self._applied_to = newest(self._applied_to, (eid for eid, _ in entries))
        await dead_letter_all(self.stores.dead_letters, "events", failed)

    def _apply_event(self, event: Event, now: float) -> None:
        ended = apply_event(self._core, event, now)
        if isinstance(event, Complete):
            self._desk.note_end(self._core, event, ended)  # maybe a take not read yet
            if ended is not None:
                self.metrics.completed.labels(event.status).inc()

    # -- decisions --------------------------------------------------------------------------
    async def _dispatch_loop(self) -> None:
        while True:
            # not wait_for: on Python 3.11 it can swallow the cancellation that ends the term
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.05):
                    await self._dirty.wait()
            self._dirty.clear()
            started = time.perf_counter()
            async with self._deciding:  # a batch's re-queue read waits for it (intake.py)
                decisions = self._core.decide(time.time())
                if decisions and not await grant(
                    self.stores, self._core, decisions, self.term, self.metrics
                ):
                    return  # deposed: grant nothing more (the next leader rebuilds)
            if decisions:
                self.metrics.decide_seconds.observe(time.perf_counter() - started)
            # the fast lane: lend idle slots, reclaim contended ones (for what waits: decide
            # again now, not at the next cycle the clock brings)
            stepped = self._acting() and await self._desk.step(self._core, time.time())
            if stepped and self._core.pending:
                self._dirty.set()

    async def _scrape_loop(self) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                records = await self.stores.workers.list()
                sync_workers(self._core, records)
                samples = await asyncio.gather(
                    *(scrape_or_unhealthy(session, r.url or "") for r in records)
                )
                now = time.time()
                for record, sample in zip(records, samples, strict=True):
                    observe(self._core, record.id, sample)
                    await self.stores.workers.set_metrics(record.id, sample, now)
                self._dirty.set()
                await asyncio.sleep(self.settings.scrape_interval_s)

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.checkpoint_interval_s)
            await self.checkpoint()

    async def checkpoint(self) -> None:
        core, now = self._core, time.time()
        state = LeaderState(
            ledger=core.ctx.ledger.snapshot(),
            dispatcher=core.dispatcher.snapshot(),
            running_n_out={i: r.job.n_out for i, r in core.running.items()},
            controller=controller_snapshot(core),
            events_applied_to=self._applied_to,
        )
        saved = await self.stores.checkpoints.save_leader(state, fencing_token=self.fencing_token)
        if not saved:
            if self.term is not None:
                self.term.end()
            raise StateUnavailable("fencing token is stale: another scheduler leads")
        live = live_view(core, self.holder, now)
        if await self.stores.checkpoints.save_live(live, fencing_token=self.fencing_token):
            await self._history.record(self.stores.live_history, live, core.ctx.ledger)
        if isinstance(live.workflows, list):
            self.metrics.export_workflows(live.workflows)
        self.metrics.queue_depth.set(len(core.pending))
        self.metrics.inflight.set(len(core.running))

    def _fairness(self) -> Snapshot:
        """Per-node gauges of the current core, for a scrape (see `FairnessCollector`)."""
        core = self._core
        policy = core.dispatcher.policy
        alpha = getattr(policy.params, "alpha", DEFAULT_SAFI_ALPHA)  # ExFairS's, when active
        rows = node_fairness(core, time.time(), float(alpha))
        return rows, policy.name, policy.params.model_dump()

    async def _knobs_loop(self) -> None:
        subscription = await self.stores.knobs.subscribe()
        async with subscription:
            # catch up with changes made while we were not subscribed
            for name, value in (await self.stores.knobs.get_all()).items():
                self.apply_knob(name, value)
            async for change in subscription:
                self.apply_knob(change.name, change.value)
                self._dirty.set()

    def apply_knob(self, name: str, value: KnobValue) -> None:
        apply_knob(self._core, name, value, time.time())

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tick_interval_s)
            self._core.tick(time.time())
            await after_tick(self._core, self.advisor, self.stores.events, self.metrics)

    async def _sweep_loop(self) -> None:
        """Release what lost gateways left, then audit the slots (`slot_audit.py`); the first
        pass runs right after rebuild. An outage restarts it (`_resilient`): both confirm afresh."""
        sweeper = GatewaySweeper(self.stores, confirm_s=2 * self.settings.gateway_heartbeat_s)
        audit = SlotAudit(self.stores)
        while self._acting():
            released = await sweeper.sweep(self._core, time.time())
            for release in released:
                self.metrics.completed.labels(release.status).inc()
            if released:
                lost = sorted({r.gateway for r in released})
                log.warning("released %d requests of lost gateways %s", len(released), lost)
                self._dirty.set()
            ended = await audit.run(self._core, self._applied_to, time.time())
            self.metrics.audit_ended.inc(len(ended))
            await asyncio.sleep(self.settings.gateway_sweep_interval_s)

    async def _redis_restart_loop(self) -> None:
        """End the term when Redis restarted: a restart can lose the last writes (grants,
        arrivals) that the core already holds, so the next term rebuilds from what Redis has.
        Short outages without a restart keep the term (nothing was lost)."""
        while True:
            await asyncio.sleep(REDIS_RESTART_CHECK_S)
            run_id = await server_run_id(self.stores.redis)
            if run_id != self._redis_run_id:
                log.warning(
                    "Redis restarted (run_id %s → %s): rebuilding", self._redis_run_id, run_id
                )
                if self.term is not None:
                    self.term.end()
                return

    async def _trim_loop(self) -> None:
        """Mark how far this term applied arrivals, then trim the arrivals and events streams
        to what every group is done with."""
        while True:
            await asyncio.sleep(TRIM_INTERVAL_S)
            assert self.term is not None
            if await self._intake.mark(self.term.token):
                await self.stores.trimmer.trim()

    def _acting(self) -> bool:
        return self.term is not None and self.term.active()

    @property
    def _core(self) -> SchedulerCore:
        assert self.core is not None, "not leading"
        return self.core

    @property
    def _desk(self) -> LendingDesk:
        assert self.desk is not None, "not leading"
        return self.desk


async def _resilient(fn: Callable[[], Awaitable[None]], term: LeaderTerm) -> None:
    """Run a leader task while `term` is active; on Redis outages wait and restart it."""
    backoff = 0.1
    while term.active():
        try:
            await fn()
            return
        except StateUnavailable as exc:
            log.warning("%s: Redis unavailable (%s); retrying in %.1fs", fn.__name__, exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
