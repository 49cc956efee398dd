"""A new leader rebuilt from Redis makes the same decisions the old one would have made."""

from __future__ import annotations

import pytest

from control_plane.contracts.knobs import KnobValue, PluginChoice
from control_plane.contracts.requests import Envelope
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.control.meta import MetaController
from control_plane.core.job import Job, Outcome
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.policies.registry import build_policy
from control_plane.scheduler.rebuild import (
    DEFAULT_ADMISSION,
    DEFAULT_PLACEMENT,
    build_core,
    rebuild,
)
from control_plane.scheduler.service import SchedulerService
from control_plane.scheduler.workers import observe
from control_plane.settings import Settings
from control_plane.state import StateStores
from tests.control_plane.scheduler import test_knob_changes

KNOBS = test_knob_changes.__name__

WORKER = WorkerEntry(id="w1", url="http://w1", model="m", max_num_seqs=2)


async def _submit(stores: StateStores, i: int, tenant: str) -> None:
    job = Job(id=f"j{i}", tenant=tenant, arrival=float(i), n_in=50 + i, max_tokens=40, model="m")
    await stores.requests.submit(
        Envelope(job, {"tenant": 1.0}, "gw"),
        request_id=job.id,
        tenant=tenant,
        gateway_id="gw",
        queue_cap=100,
        now=float(i),
    )


async def _leader(stores: StateStores) -> SchedulerCore:
    core = (await rebuild(stores, "vtc", 100.0)).core
    observe(core, "w1", WorkerSample(True, 100.0, models={"m": 4096}))
    return core


async def test_takeover_continues_the_same_order(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "t")
    await stores.workers.upsert(WORKER)
    for i, tenant in enumerate(["a", "a", "a", "b", "a", "b", "c", "a", "b"]):
        await _submit(stores, i, tenant)
    old = await _leader(stores)
    for d in old.decide(100.0):
        assert await stores.requests.grant(
            d.job.id, worker_id="w1", worker_url="http://w1", now=100.0
        )
        old.progress(d.job.id, 30, 101.0)
    svc = SchedulerService(Settings(redis_url=redis_url, cluster="t"), stores, "old")
    svc.core = old
    await svc.checkpoint()

    new = await _leader(stores)
    assert set(new.running) == set(old.running)
    assert set(new.pending) == set(old.pending)
    for running in list(old.running):
        old.complete(running, _ok(), 102.0)
        new.complete(running, _ok(), 102.0)
    order_old = [d.job.id for d in old.decide(103.0)]
    order_new = [d.job.id for d in new.decide(103.0)]
    assert order_new == order_old and len(order_old) == 2
    await stores.aclose()


def _ok() -> Outcome:
    return Outcome("ok", 50, 30)


async def test_a_new_leader_keeps_the_controller_and_what_was_learnt(redis_url: str) -> None:
    stores = StateStores.open(redis_url, "auto")
    await stores.workers.upsert(WORKER)
    params = {"selector": "bandit", "period_s": 5.0, "pool": ["fcfs", "sjf", "wfq"]}
    await stores.knobs.set("policy", PluginChoice("auto", params))
    old = await _leader(stores)
    assert isinstance(old.controller, MetaController) and old.dispatcher.policy.name == "fcfs"
    old.switch_policy(build_policy("wfq", old.ctx), 100.0)  # as if the controller had chosen
    old.controller.current = "wfq"
    old.controller.selector.restore({"stats": {"sof": {"wfq": [9.0, 1.0]}}})
    for k in range(30):  # answers the length predictor learns from
        j = Job(id=f"d{k}", tenant="a", arrival=1.0, n_in=10, max_tokens=900, model="m")
        old.dispatcher.lengths.observe(j, Outcome("ok", 10, 77))
    svc = SchedulerService(Settings(redis_url=redis_url, cluster="auto"), stores, "old")
    svc.core = old
    await svc.checkpoint()

    new = await _leader(stores)
    assert isinstance(new.controller, MetaController)
    assert new.dispatcher.policy.name == "wfq" and new.controller.current == "wfq"
    assert new.controller.selector.snapshot() == {"stats": {"sof": {"wfq": [9.0, 1.0]}}}
    probe = Job(id="p", tenant="a", arrival=1.0, n_in=10, max_tokens=900, model="m")
    assert new.dispatcher.lengths.predict(probe) == old.dispatcher.lengths.predict(probe) < 900
    svc.core = new
    svc.apply_knob("policy", PluginChoice("auto", params))  # the knob replayed: kept as is
    assert new.controller.selector.snapshot() == {"stats": {"sof": {"wfq": [9.0, 1.0]}}}
    await stores.aclose()


async def test_a_ledger_that_cannot_be_restored_does_not_stop_the_takeover(
    redis_url: str,
) -> None:
    """An infinite counter (a weight near zero divides a charge) is saved as null; restoring
    it raised, the scheduler task died, and every standby that took the lease did the same.
    Now the successor logs it and starts from an empty ledger."""
    stores = StateStores.open(redis_url, "inf")
    await stores.workers.upsert(WORKER)
    await _submit(stores, 0, "a")
    old = await _leader(stores)
    old.ctx.ledger.add_counter(("a",), float("inf"))
    svc = SchedulerService(Settings(redis_url=redis_url, cluster="inf"), stores, "old")
    svc.core = old
    await svc.checkpoint()

    new = await _leader(stores)
    assert set(new.pending) == {"j0"}
    assert new.ctx.ledger.counter(("a",)) == 0.0
    assert [d.job.id for d in new.decide(101.0)] == ["j0"]
    await stores.aclose()


@pytest.mark.parametrize(
    "knobs",
    [
        {"placement": PluginChoice("missing.module:Placement")},  # a module this host lacks
        {"admission": PluginChoice("capacity", {"renamed_since": 1})},  # an older build's
        {"placement": PluginChoice(f"{KNOBS}:RaisingPlacement")},
        {"admission": PluginChoice(f"{KNOBS}:RaisingAdmission")},
        {"policy": PluginChoice(f"{KNOBS}:RaisingPolicy")},
    ],
)
def test_a_knob_that_cannot_be_built_here_gives_the_default_not_a_failed_takeover(
    knobs: dict[str, KnobValue],
) -> None:
    """`build_core` built admission and placement unguarded, and caught only a policy's
    `ValueError`: a stored knob the scheduler's host cannot build (a plug-in module its image
    lacks, params a newer build refuses, a plug-in that raises) failed every takeover, so no
    scheduler could lead and nothing was scheduled."""
    core = build_core(knobs, Ledger(), "vtc")
    (name,) = knobs
    assert list(core.knob_errors) == [name] and "cannot be built" in core.knob_errors[name]
    dispatcher = core.dispatcher
    assert (dispatcher.policy.name, dispatcher.admission.name, dispatcher.placement.name) == (
        "vtc",
        DEFAULT_ADMISSION.name,
        DEFAULT_PLACEMENT.name,
    )
