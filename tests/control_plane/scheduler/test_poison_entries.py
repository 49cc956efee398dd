"""The leader's event and arrival loops skip (and dead-letter) what they cannot apply: one bad
entry never crashes a loop or holds back the entries after it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from control_plane.contracts.events import Complete, Event, Withdrawn
from control_plane.contracts.requests import Envelope, RecordError, RequestRecord, decode_record
from control_plane.core.job import Job
from control_plane.scheduler.lending import LendingDesk
from control_plane.scheduler.rebuild import job_from_record, rebuild
from control_plane.scheduler.service import SchedulerService
from control_plane.settings import Settings
from control_plane.state import StateStores
from control_plane.state.tasks import stop_tasks

NOW = 1_700_000_000.0


def job(i: int) -> Job:
    return Job(id=f"j{i}", tenant="a", arrival=NOW + i, n_in=10, max_tokens=20, model="m")


@pytest.fixture
async def service(redis_url: str) -> AsyncIterator[SchedulerService]:
    stores = StateStores.open(redis_url, "poison")
    await stores.events.ensure_groups()
    await stores.arrivals.ensure_group()
    svc = SchedulerService(Settings(redis_url=redis_url, cluster="poison"), stores, "s1")
    svc.core = (await rebuild(stores, "vtc", NOW)).core
    svc.desk = LendingDesk(stores.lending, 0, enabled=False, per_worker=1)
    yield svc
    await svc.http.aclose()
    await stores.aclose()


def _record(**fields: object) -> RequestRecord:
    text = {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
    record = decode_record("j1", {"status": "queued", **text})
    assert record is not None
    return record


def test_records_without_a_usable_job_are_refused() -> None:
    assert _record(envelope={"job": job(1).to_json()}, seq="3").job()[0].seq == 3
    bad = [
        _record(),
        _record(envelope="x"),
        _record(envelope={"job": {"id": "j", "bogus": 1}}),
        _record(envelope={"job": {**job(1).to_json(), "n_in": "ten"}}),
        _record(envelope={"job": {**job(1).to_json(), "tenant": 7}}),
        _record(envelope={"job": job(1).to_json(), "weights": {"tenant": "heavy"}}),
        _record(envelope={"job": job(1).to_json()}, seq="one"),
    ]
    for record in bad:
        with pytest.raises(RecordError):
            record.job()
        assert job_from_record(record) is None


async def test_events_the_core_cannot_apply_are_dead_lettered_and_the_rest_applied(
    service: SchedulerService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Malformed entries never get this far (the stream dead-letters them as `decode`,
    tests/control_plane/state/test_dead_letters.py); a well-formed event that the core raises
    on — a bug, or a policy that cannot take it — is set aside the same way."""
    core = service.core
    assert core is not None
    for i in (1, 2):
        core.arrive(job(i), None, NOW)

    def refuse(job_id: str, outcome: Any, now: float) -> None:
        raise RuntimeError(f"cannot complete {job_id}: lots of trouble")

    monkeypatch.setattr(core, "complete", refuse)
    entries: list[tuple[str, Event]] = [
        ("1-1", Complete("j1", "ok", finished=NOW, n_out=3)),
        ("1-2", Withdrawn("j1")),
        ("1-3", Complete("j2", "ok", finished=NOW, n_out=5)),
        ("1-4", Withdrawn("j2")),
    ]
    await service._apply_events(entries)
    assert core.pending == {}  # both withdrawals applied after the failed entries
    letters = await service.stores.dead_letters.list()
    assert sorted(x.entry_id for x in letters) == ["1-1", "1-3"]
    assert {(x.consumer, x.kind, x.source) for x in letters} == {("scheduler", "apply", "events")}
    first = next(x for x in letters if x.entry_id == "1-1")
    assert "lots of trouble" in first.reason
    assert (first.fields["type"], first.fields["id"], first.fields["n_out"]) == (
        "complete",
        "j1",
        3,
    )


async def test_the_arrivals_loop_survives_a_bad_envelope(service: SchedulerService) -> None:
    stores = service.stores
    # an older or broken gateway's entry, written behind the state package's back
    bad = {"job": {"id": "bad", "tenant": "a", "n_in": "x"}}
    await stores.redis.xadd(
        stores.keyspace.arrivals, {"id": "bad", "seq": "1", "envelope": json.dumps(bad)}
    )
    await stores.requests.submit(
        Envelope(job(5), {}, "g"), request_id="j5", tenant="a", gateway_id="g", queue_cap=9, now=NOW
    )
    loop = asyncio.create_task(service._arrivals_loop())
    try:
        for _ in range(100):
            if "j5" in service._core.pending:
                break
            await asyncio.sleep(0.05)
        assert set(service._core.pending) == {"j5"}
        assert not loop.done()
    finally:
        await stop_tasks([loop])
    (letter,) = await stores.dead_letters.list()
    assert (letter.consumer, letter.kind, letter.source) == ("scheduler", "decode", "arrivals")
    assert "envelope.job." in letter.reason
    assert json.loads(letter.fields["envelope"]) == bad and letter.entry_id != ""
