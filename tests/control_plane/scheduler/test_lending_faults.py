"""The fast lane when something around it goes wrong, with a real Redis, the real core and the
real scripts: a worker registered again at another URL, a take the policy cannot take, a
gateway whose clock runs ahead of the leader's."""

from __future__ import annotations

import pytest

from control_plane.contracts.events import Complete
from control_plane.contracts.requests import Envelope
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.job import Job
from control_plane.scheduler.entries import apply_event
from control_plane.scheduler.workers import observe, sync_workers
from control_plane.state import StateStores
from tests.control_plane.scheduler.test_lending import CAP, NOW, Harness


async def _take(h: Harness, rid: str) -> tuple[str, str] | None:
    """A gateway's fast-lane submit; → the (worker, URL) it took, or None when it queued."""
    job = Job(id=rid, tenant="a", arrival=NOW, n_in=10, max_tokens=8, model="m")
    result = await h.stores.requests.submit(
        Envelope(job, {}, "gw"), request_id=rid, tenant="a", gateway_id="gw",
        queue_cap=10_000, now=NOW, fast=True,
    )  # fmt: skip
    return None if result.grant is None else (result.grant.worker_id, result.grant.worker_url)


async def test_takes_go_to_a_worker_s_new_url_once_it_is_registered_again(
    redis_url: str,
) -> None:
    """Regression: the slots lent at the old URL stayed lent (until half were taken and the
    worker topped up), so gateways kept sending takes to an address the worker had left."""
    stores = StateStores.open(redis_url, "lend-moved")
    h = await Harness.start(stores, per_worker=3)
    await h.cycle()  # 3 slots lent on each worker
    moved = WorkerEntry(id="w1", url="http://w1-moved", model="m", max_num_seqs=CAP)
    await stores.workers.upsert(moved)
    sync_workers(h.core, await stores.workers.list())  # the scrape loop's sync
    await h.cycle()  # reclaims the model's loans, lends again at the new URL

    takes = [t for i in range(6) if (t := await _take(h, f"t{i}")) is not None]
    assert {url for worker, url in takes if worker == "w1"} == {"http://w1-moved"}
    assert len(takes) == 6
    await h.read_arrivals()
    await h.check()
    await stores.aclose()


async def test_a_take_the_policy_raises_on_is_set_aside_and_the_term_goes_on(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: only RecordError, RuntimeError and ValueError were caught, so any other
    error (a policy's bug) escaped the arrivals loop and ended the leader's term; a queued
    arrival raising the same was set aside."""
    stores = StateStores.open(redis_url, "lend-poison")
    h = await Harness.start(stores, per_worker=3)
    await h.cycle()
    policy = h.core.dispatcher.policy
    real_push = policy.push

    def push(job: Job, now: float) -> None:
        real_push(job, now)  # in the policy's queue, then it fails: nothing may stay there
        if job.id == "r1":
            raise TypeError("a policy's bug")

    monkeypatch.setattr(policy, "push", push)
    assert await h.submit() and await h.submit()  # r1, r2: both taken on the fast lane

    await h.read_arrivals()  # before: TypeError out of take_in

    assert set(h.core.running) == {"r2"} and "r1" not in h.core.pending
    assert h.core.decide(NOW) == []  # r1 is not left in the policy's queue to be granted
    worker = (await stores.requests.inflight())["r1"]
    held = h.core.workers[worker].lent
    await h.check()  # r1 still runs: its slot still counts
    await stores.requests.finish("r1", now=NOW, status="ok")
    event = Complete("r1", "ok", finished=NOW, n_in=10, n_out=8)
    h.desk.note_end(h.core, event, apply_event(h.core, event, NOW))
    assert h.core.workers[worker].lent == held - 1  # its end frees the slot (not the term's)
    await h.check()
    await stores.aclose()


async def test_a_take_set_aside_after_its_end_was_heard_frees_its_slot_at_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores = StateStores.open(redis_url, "lend-poison-ended")
    h = await Harness.start(stores, per_worker=3)
    await h.cycle()
    monkeypatch.setattr(h.core.dispatcher.policy, "push", _raise)
    assert await h.submit()
    worker = (await stores.requests.inflight())["r1"]
    await stores.requests.finish("r1", now=NOW, status="ok")
    event = Complete("r1", "ok", finished=NOW, n_in=10, n_out=8)
    h.desk.note_end(h.core, event, apply_event(h.core, event, NOW))  # read before the take
    held = h.core.workers[worker].lent

    await h.read_arrivals()

    assert h.core.workers[worker].lent == held - 1 and not h.core.running
    await h.check()
    await stores.aclose()


def _raise(job: Job, now: float) -> None:
    raise TypeError("a policy's bug")


async def test_a_gateway_clock_ahead_does_not_bench_a_worker_for_its_skew(
    redis_url: str,
) -> None:
    """Regression: a re-queue stamped by a gateway an hour ahead marked the worker failed
    until an hour later by the leader's clock, healthy scrapes notwithstanding."""
    stores = StateStores.open(redis_url, "lend-clock")
    h = await Harness.start(stores, per_worker=3)
    await h.cycle()
    taken = await _take(h, "t1")
    assert taken is not None
    await h.read_arrivals()
    assert await stores.requests.requeue("t1", now=NOW + 3600.0)  # the gateway's clock
    await h.read_arrivals()
    worker = h.core.workers[taken[0]]
    assert worker.failed and worker.failed_until == NOW + h.core.failure_cooldown_s

    observe(h.core, taken[0], WorkerSample(True, NOW + 60.0, models={"m": 4096}))
    assert not worker.failed
    await stores.aclose()


async def test_a_take_set_aside_then_requeued_gives_its_first_worker_s_slot_back(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: re-queued after its worker failed, then served elsewhere, the request's end
    was the core's, so its first worker's slot stayed counted as lent for the rest of the
    term."""
    stores = StateStores.open(redis_url, "lend-poison-requeued")
    h = await Harness.start(stores, per_worker=3)
    await h.cycle()
    policy = h.core.dispatcher.policy
    real_push, calls = policy.push, [0]

    def push(job: Job, now: float) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise TypeError("a transient policy bug")
        real_push(job, now)

    monkeypatch.setattr(policy, "push", push)
    assert await h.submit()
    await h.read_arrivals()  # the take is set aside
    assert "r1" not in h.core.running
    assert await stores.requests.requeue("r1", now=NOW)  # its worker failed before answering
    await h.read_arrivals()  # queued in the core this time
    await h.cycle()
    assert "r1" in h.core.running
    await stores.requests.finish("r1", now=NOW, status="ok")
    event = Complete("r1", "ok", finished=NOW, n_in=10, n_out=8)
    h.desk.note_end(h.core, event, apply_event(h.core, event, NOW))

    real = await stores.requests.inflight()
    lent = (await stores.lending.lent()).get("m", {})
    for worker_id, slot in h.core.workers.items():  # the leader counts what Redis holds
        held = list(real.values()).count(worker_id) + lent.get(worker_id, 0)
        assert len(slot.inflight) + slot.lent == held, (worker_id, slot.lent, real, lent)
    await stores.aclose()
