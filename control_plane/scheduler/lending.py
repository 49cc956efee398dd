"""The leader's side of the fast lane: which worker slots it lends, and taking them back.

Rule (docs/architecture.md §2, "The fast lane"). The leader alone decides capacity. For a
model with nothing pending, when the admission, placement and limits in force would grant a
lone request on the spot (`lendable`), it lends up to `per_worker` free slots of each of the
model's workers that admission would still admit (topping a worker up again once half of its
loan is taken); gateways then take them in their submit script (nothing of the model queued ∧
a slot left → granted). Every lent slot counts as
occupied in the leader's own worker views (`WorkerSlot.lent`) until the leader either reads
the take on `arrivals` (the slot becomes that request, charged like its own dispatch:
`SchedulerCore.adopt_granted`) or reclaims it. As soon as anything of the model is pending,
a lent worker stops being admissible or lending is off, its untaken slots are reclaimed.
Guarantee: requests granted plus slots lent on a worker never exceed what admission allows
(no over-commit), across gateway replicas (slots are taken atomically) and leader changes (a
new leader reclaims every lent slot before it reads `inflight`, and ignores takes of slots
its predecessor lent: `inflight` already holds them).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import replace

from control_plane.admission.capacity import CapacityAdmission
from control_plane.contracts.events import Complete
from control_plane.core.job import Outcome
from control_plane.core.scheduler_core import SchedulerCore, WorkerSlot
from control_plane.core.worker_view import WorkerView
from control_plane.settings import Settings
from control_plane.state.arrivals import Arrival
from control_plane.state.fast_lane import LentSlots, Loan

log = logging.getLogger(__name__)
LENDING_PLACEMENTS = frozenset({"least_loaded", "round_robin"})
"""Placements under which a take's worker (the one with the most untaken slots) is one the
placement could have chosen; the others (`kv_aware`, `kairos_slots`: job-dependent choices
or vetoes) get no lending."""
EARLY_ENDS_KEPT = 10_000
Failure = tuple[str, dict[str, object], str]


def lendable(core: SchedulerCore) -> str | None:
    """Why nothing may be lent under the plug-ins in force, or None when lending is exact:
    `capacity` admission without a token fence (its `admit` is `has_room`, which depends on
    the worker only), a placement of `LENDING_PLACEMENTS`, no execution limits."""
    d = core.dispatcher
    admission = d.admission
    fence = getattr(admission.params, "token_fence", None)
    if not isinstance(admission, CapacityAdmission) or fence is not None:
        return f"admission {admission.name} decides per request"
    if d.placement.vetoes or d.placement.name not in LENDING_PLACEMENTS:
        return f"placement {d.placement.name} chooses per request"
    if not d.limits.off:
        return "execution limits are set"
    return None


class LendingDesk:
    """One leader term's lending: what it lent, what it reclaims, the takes it adopts.

    Lend and reclaim calls carry a sequence number; an unanswered call (Redis outage) is
    repeated before any other, so the counts in `WorkerSlot.lent` never drift from Redis.
    """

    def __init__(self, slots: LentSlots, token: int, *, enabled: bool, per_worker: int) -> None:
        self._slots = slots
        self._token = token
        self.enabled = enabled
        self.per_worker = per_worker
        self._seq = 0
        self._unanswered: Callable[[], Awaitable[None]] | None = None
        self._lent_on: dict[str, dict[str, str]] = {}
        """Model → workers it lent on since that model's last reclaim, with the URL lent
        (gateways send takes there)."""
        self._early_ends: OrderedDict[str, Outcome] = OrderedDict()
        """Ends reported for requests the leader did not know: a take it has not read yet."""
        self._set_aside: OrderedDict[str, str] = OrderedDict()
        """Takes it could not adopt, still running: request id → worker whose slot they hold."""
        self.adopted = 0
        self._returned = False
        """Whether the current step took back slots (counted free again)."""

    async def take_over(self) -> None:
        """Reclaim every lent slot (a predecessor's): call before reading `inflight`."""
        reclaimed = await self._slots.reclaim(None, fencing_token=self._token, seq=self._next())
        if reclaimed:
            log.info("took back %d slots lent by the previous leader", sum(reclaimed.values()))

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    # -- takes and ends ---------------------------------------------------------------------
    def adopt(self, core: SchedulerCore, takes: list[Arrival], now: float) -> list[Failure]:
        """Adopt this term's takes as dispatched requests; a predecessor's are already in
        the core (rebuilt from `inflight`) or ended. → the takes that could not be adopted."""
        failed: list[Failure] = []
        for take in takes:
            if take.lent_by != self._token or take.worker is None:
                continue
            slot = core.workers.get(take.worker)
            try:
                job, weights = take.record().job()
                adopted = core.adopt_granted(job, weights, take.worker, now)
            except Exception as exc:  # a bad record or a policy that cannot take it: as a queued
                # arrival's, set aside (its term goes on)
                core.discard(take.id)
                failed.append((take.entry_id, {"id": take.id}, f"{type(exc).__name__}: {exc}"))
                if take.id not in core.running:  # it raised before the core held it
                    self._count_until_end(core, take.id, take.worker)
                continue
            if not adopted and slot is not None:
                slot.lent = max(0, slot.lent - 1)
            self.adopted += 1
            ended = self._early_ends.pop(take.id, None)
            if ended is not None:
                core.complete(take.id, ended, now)
        return failed

    def _count_until_end(self, core: SchedulerCore, request_id: str, worker_id: str) -> None:
        """A take set aside still runs on its worker: its slot stays counted as lent (never
        over-commit) until its end is heard of, and is free again from then."""
        if self._early_ends.pop(request_id, None) is not None:
            _free_one(core, worker_id)
            return
        self._set_aside[request_id] = worker_id
        while len(self._set_aside) > EARLY_ENDS_KEPT:
            self._set_aside.popitem(last=False)

    def left_its_worker(self, core: SchedulerCore, request_id: str) -> None:
        """A request re-queued after its worker failed: a take set aside no longer holds
        that worker's slot."""
        worker_id = self._set_aside.pop(request_id, None)
        if worker_id is not None:
            _free_one(core, worker_id)

    def note_end(self, core: SchedulerCore, event: Complete, ended: object) -> None:
        """A `complete` the core did not know: the end of a take set aside (its slot is free
        again), or kept, as it may be a take not read yet."""
        if ended is None and event.id not in core.pending:
            worker_id = self._set_aside.pop(event.id, None)
            if worker_id is not None:
                _free_one(core, worker_id)
                return
            self._early_ends[event.id] = event.outcome()
            while len(self._early_ends) > EARLY_ENDS_KEPT:
                self._early_ends.popitem(last=False)

    # -- lending ----------------------------------------------------------------------------
    async def step(self, core: SchedulerCore, now: float) -> bool:
        """Reclaim what must not stay lent, then lend free slots of idle models. → whether
        slots came back: capacity a request pending now may get at once (not at the next
        cycle the clock brings)."""
        self._returned = False
        if self._unanswered is not None:
            await self._unanswered()
        refusal = None if self.enabled else "off"
        refusal = refusal or lendable(core)
        if refusal and not self._lent_on:
            return self._returned
        pools = _pools(core)
        pending = _pending_models(core, set(pools) | set(self._lent_on))
        stale = {
            model
            for model, workers in self._lent_on.items()
            if refusal
            or model in pending
            or not all(self._fits(core, w, url, model, now) for w, url in workers.items())
        }
        if stale:
            await self._call(lambda seq: self._reclaim(core, stale, seq))
        if refusal:
            return self._returned
        for model, slots in pools.items():
            if model in pending:
                continue
            loans = [loan for w, slot in slots if (loan := self._loan(core, w, slot, now))]
            if loans:
                await self._lend(core, model, loans)
        return self._returned

    def _fits(self, core: SchedulerCore, worker_id: str, url: str, model: str, now: float) -> bool:
        """Whether the worker is still where its slots were lent (a worker registered again at
        another URL would get takes at the old one) and admission would still admit the last
        of them."""
        slot = core.workers.get(worker_id)
        if slot is None:
            return False
        view = slot.view()
        if not view.serves(model) or view.url != url:
            return False
        if slot.lent == 0:
            return True
        return core.dispatcher.admission.has_room(replace(view, inflight=view.inflight - 1), now)

    def _loan(
        self, core: SchedulerCore, worker_id: str, slot: WorkerSlot, now: float
    ) -> Loan | None:
        if 2 * slot.lent > self.per_worker:
            # topped up only once half is taken: one lend call per per_worker/2 takes, not
            # one per take (the lane stays open while any slot is left)
            return None
        view, k = slot.view(), 0
        room = core.dispatcher.admission.has_room
        probe: WorkerView = view
        while slot.lent + k < self.per_worker and room(probe, now):
            k += 1
            probe = probe.with_dispatch(0)
        return Loan(worker_id, view.url, k) if k and view.url else None

    async def _call(self, op: Callable[[int], Awaitable[None]]) -> None:
        """Run `op` with the next sequence number; unanswered, it is repeated (same number)
        at the start of the next step, before anything else."""
        seq = self._next()

        async def attempt() -> None:
            await op(seq)
            self._unanswered = None

        self._unanswered = attempt
        await attempt()

    async def _lend(self, core: SchedulerCore, model: str, loans: list[Loan]) -> None:
        """Count the slots as occupied first (an unanswered call may have lent them), then
        lend: the count is made once, the call repeated until answered."""
        for loan in loans:
            core.workers[loan.worker_id].lent += loan.slots
            self._lent_on.setdefault(model, {})[loan.worker_id] = loan.worker_url
        token = self._token
        await self._call(lambda seq: self._slots.lend(model, loans, fencing_token=token, seq=seq))

    async def _reclaim(self, core: SchedulerCore, models: set[str], seq: int) -> None:
        back = await self._slots.reclaim(models, fencing_token=self._token, seq=seq)
        for (_, worker_id), n in back.items():
            slot = core.workers.get(worker_id)
            if slot is not None and n > 0:
                slot.lent = max(0, slot.lent - n)
                self._returned = True
        for model in models:
            self._lent_on.pop(model, None)


async def open_desk(slots: LentSlots, token: int, settings: Settings) -> LendingDesk:
    """A new term's desk, once every slot a predecessor lent is taken back."""
    desk = LendingDesk(slots, token, enabled=settings.fast_path, per_worker=settings.fast_path_lend)
    await desk.take_over()
    return desk


def _free_one(core: SchedulerCore, worker_id: str) -> None:
    slot = core.workers.get(worker_id)
    if slot is not None:
        slot.lent = max(0, slot.lent - 1)


def _pools(core: SchedulerCore) -> dict[str, list[tuple[str, WorkerSlot]]]:
    """Model → its workers that may take a dispatch now (healthy, active, not failed)."""
    out: dict[str, list[tuple[str, WorkerSlot]]] = {}
    for worker_id, slot in core.workers.items():
        view = slot.view()
        if view.healthy and not view.draining and view.model:
            out.setdefault(view.model, []).append((worker_id, slot))
    return out


def _pending_models(core: SchedulerCore, models: set[str]) -> set[str]:
    """Which of `models` have a pending job (stops scanning once all are found)."""
    found: set[str] = set()
    for job in core.pending.values():
        if job.model in models:
            found.add(job.model)
            if len(found) == len(models):
                break
    return found


def is_take(arrival: Arrival) -> bool:
    """An arrival announcing a fast-lane take (already granted) rather than a queued request."""
    return arrival.worker is not None
