"""`reconcile`: the registry follows a scheduler's ARBITER_WORKERS for the entries it owns
(real Redis)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from control_plane.contracts.workers import ADMIN, CONFIG, CONFIG_REMOVED, WorkerEntry
from control_plane.recorder.service import Recorder
from control_plane.scheduler.configured import reconcile
from control_plane.scheduler.service import SchedulerService
from control_plane.settings import Settings
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks
from storage.db import Database
from tests.support.waiting import until

ACTOR = "scheduler:test"


def _stores(redis_url: str) -> StateStores:
    return StateStores.open(redis_url, f"cfg-{uuid.uuid4().hex[:8]}")


def _listed(redis_url: str, workers: str) -> list[WorkerEntry]:
    return Settings(redis_url=redis_url, workers=workers).static_workers()


async def _by_id(stores: StateStores) -> dict[str, WorkerEntry]:
    return {w.id: w for w in await stores.workers.list()}


async def test_a_worker_taken_out_of_the_settings_is_drained_and_comes_back_when_listed(
    redis_url: str,
) -> None:
    stores = _stores(redis_url)
    await reconcile(stores, _listed(redis_url, "http://w1:8000|64,http://w2:8000"), ACTOR)
    got = await _by_id(stores)
    assert {w.origin for w in got.values()} == {CONFIG}
    assert all(w.active for w in got.values())

    await reconcile(stores, _listed(redis_url, "http://w1:8000|64"), ACTOR)
    got = await _by_id(stores)
    assert got["w1:8000"].active and got["w1:8000"].origin == CONFIG
    assert (got["w2:8000"].status, got["w2:8000"].origin) == ("draining", CONFIG_REMOVED)
    assert got["w2:8000"].url == "http://w2:8000"  # drained, not forgotten

    await reconcile(stores, _listed(redis_url, "http://w1:8000|64,http://w2:8000|32"), ACTOR)
    got = await _by_id(stores)
    assert (got["w2:8000"].status, got["w2:8000"].origin) == ("active", CONFIG)
    assert got["w2:8000"].max_num_seqs == 32


async def test_an_operators_drain_of_a_listed_worker_survives_a_takeover(redis_url: str) -> None:
    stores = _stores(redis_url)
    listed = _listed(redis_url, "http://w1:8000")
    await reconcile(stores, listed, ACTOR)
    await stores.workers.set_status("w1:8000", "draining")
    await reconcile(stores, listed, ACTOR)
    assert (await _by_id(stores))["w1:8000"].status == "draining"


async def test_entries_the_settings_do_not_own_are_never_touched(redis_url: str) -> None:
    stores = _stores(redis_url)
    await stores.workers.upsert(WorkerEntry("a:1", "http://a:1", origin=ADMIN))
    await stores.workers.upsert(WorkerEntry("up:2", "http://up:2"))  # `arbiter up`, a worker
    await reconcile(stores, _listed(redis_url, "http://w1:8000"), ACTOR)
    got = await _by_id(stores)
    assert got["a:1"].active and got["a:1"].origin == ADMIN
    assert got["up:2"].active and got["up:2"].origin is None


async def test_an_entry_older_than_the_origin_field_is_claimed_when_listed(
    redis_url: str,
) -> None:
    stores = _stores(redis_url)
    await stores.workers.upsert(WorkerEntry("w1:8000", "http://w1:8000", kind="vllm"))
    await reconcile(stores, _listed(redis_url, "http://w1:8000"), ACTOR)
    assert (await _by_id(stores))["w1:8000"].origin == CONFIG
    await reconcile(stores, [], ACTOR)
    assert (await _by_id(stores))["w1:8000"].status == "draining"


async def test_an_admin_registration_takes_a_configured_worker_over(redis_url: str) -> None:
    stores = _stores(redis_url)
    await reconcile(stores, _listed(redis_url, "http://w1:8000"), ACTOR)
    await stores.workers.upsert(WorkerEntry("w1:8000", "http://w1:8000", origin=ADMIN))
    await reconcile(stores, [], ACTOR)
    got = (await _by_id(stores))["w1:8000"]
    assert got.active and got.origin == ADMIN


async def _lead_once(redis_url: str, cluster: str, workers: str) -> None:
    settings = Settings(redis_url=redis_url, cluster=cluster, workers=workers, lease_ttl_s=0.5)
    stores = StateStores.open(redis_url, cluster)
    service = SchedulerService(settings, stores, f"sched-{uuid.uuid4().hex[:6]}")
    runner = asyncio.create_task(service.run())
    try:
        await until(lambda: service.leading, 10.0)
    finally:
        await stop_tasks([runner])
        await service.http.aclose()
        await stores.aclose()


async def test_a_new_leader_drains_what_its_settings_no_longer_list(redis_url: str) -> None:
    cluster = f"cfg-{uuid.uuid4().hex[:8]}"
    await _lead_once(redis_url, cluster, "http://w1:8000,http://w2:8000")
    await _lead_once(redis_url, cluster, "http://w1:8000")  # the next rollout's settings
    stores = StateStores.open(redis_url, cluster)
    try:
        got = await _by_id(stores)
    finally:
        await stores.aclose()
    assert got["w1:8000"].active
    assert (got["w2:8000"].status, got["w2:8000"].origin) == ("draining", CONFIG_REMOVED)


async def test_each_change_is_audited_by_the_recorder_as_the_admin_api_audits_its_own(
    redis_url: str, tmp_path: Path
) -> None:
    """Before, a drain at takeover left no audit row (only a warning in the leader's log)."""
    stores = _stores(redis_url)
    await stores.events.ensure_groups()
    await reconcile(stores, _listed(redis_url, "http://w1:8000|64,http://w2:8000"), ACTOR)
    await reconcile(stores, _listed(redis_url, "http://w1:8000|64"), ACTOR)
    await reconcile(stores, _listed(redis_url, "http://w1:8000|64"), ACTOR)  # nothing new
    await reconcile(stores, _listed(redis_url, "http://w1:8000|64,http://w2:8000"), ACTOR)
    db = Database(f"sqlite:///{tmp_path / 'audit.db'}")
    db.migrate()
    recorder = Recorder(stores, db, "rec-cfg", batch=50, interval_s=0.05, claim_idle_s=60)
    task = asyncio.create_task(recorder.run())

    def rows() -> list[tuple[str, str, object, object]]:
        with db.reader() as r:
            listed = r.audit.list(limit=100)
        return [(e.action, e.target, e.old, e.new) for e in sorted(listed, key=lambda e: e.id)]

    try:
        await until(lambda: len(rows()) == 4, 20.0)
    finally:
        await stop_tasks([task])
    assert rows() == [
        ("worker.register", "worker:w1:8000", None, {"url": "http://w1:8000", "max_num_seqs": 64}),
        (
            "worker.register",
            "worker:w2:8000",
            None,
            {"url": "http://w2:8000", "max_num_seqs": None},
        ),
        ("worker.drain", "worker:w2:8000", {"status": "active"}, {"status": "draining"}),
        ("worker.undrain", "worker:w2:8000", {"status": "draining"}, {"status": "active"}),
    ]
    with db.reader() as r:
        assert {(e.actor, e.reason) for e in r.audit.list(limit=100)} == {
            (ACTOR, "ARBITER_WORKERS at takeover")
        }
    db.dispose()
    await stores.aclose()


async def test_a_change_made_between_its_read_and_its_write_wins(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's `DELETE` and an admin registration land just after reconcile read the
    registry: the deleted worker is not re-created (before: an entry with no URL, listed
    forever) and the admin's registration is not taken over."""
    stores = _stores(redis_url)
    await reconcile(stores, _listed(redis_url, "http://w1:8000,http://w2:8000"), ACTOR)
    read = stores.workers.list

    async def read_then_race() -> list[WorkerEntry]:
        seen = await read()
        await stores.workers.remove("w2:8000")
        await stores.workers.upsert(WorkerEntry("w3:8000", "http://w3:8000", origin=ADMIN))
        return seen

    monkeypatch.setattr(stores.workers, "list", read_then_race)
    await reconcile(stores, _listed(redis_url, "http://w1:8000,http://w3:8000|8"), ACTOR)
    monkeypatch.undo()
    got = await _by_id(stores)
    assert set(got) == {"w1:8000", "w3:8000"}
    assert (got["w3:8000"].origin, got["w3:8000"].max_num_seqs) == (ADMIN, None)
    await stores.aclose()
