"""Request history: idempotent batch inserts, reads, usage totals."""

from __future__ import annotations

import dataclasses

import pytest

from storage.db import Database
from storage.errors import InvalidValueError
from storage.records import RequestRecord


def _request(i: int, **changes: object) -> RequestRecord:
    base = RequestRecord(
        id=f"req-{i:05d}", tenant="acme", app="chat", agent="planner", arrival=1_000.0 + i,
        status="ok", workflow="wf-1", upstream="req-0" if i else None, model="tiny",
        task="chat", priority=1, dispatched_at=1_000.5 + i, first_token_at=1_000.7 + i,
        finished_at=1_002.0 + i, n_in=100 + i, n_out=20, unified_cost=140.0 + i,
        slo_ttft_ms=500.0, slo_tpot_ms=50.0, slo_e2e_ms=None, slo_violated=i % 4 == 0,
        ttft_ms=700.0, tpot_ms=40.0, e2e_ms=2000.0, queue_ms=500.0, worker="w1",
        policy="vtc", error=None, attempts=1,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_insert_many_is_idempotent_on_id(db: Database) -> None:
    batch = [_request(i) for i in range(50)]
    with db.repos() as r:
        assert r.requests.insert_many(batch) == 50
    with db.repos() as r:
        assert r.requests.insert_many(batch) == 0  # a replayed batch
        overlapping = [*batch[40:], *(_request(i) for i in range(50, 60))]
        assert r.requests.insert_many(overlapping) == 10
        # within one batch, the first row of an id wins
        dupes = [_request(70, n_out=1), _request(70, n_out=999)]
        assert r.requests.insert_many(dupes) == 1
    with db.reader() as r:
        assert r.requests.count() == 61
        stored = r.requests.get(request_id="req-00070")
        assert stored is not None and stored.n_out == 1


def test_a_row_round_trips_every_field(db: Database) -> None:
    original = _request(3, error="upstream closed", status="error", attempts=2, slo_violated=True)
    sparse = RequestRecord(id="bare", tenant="acme", arrival=5.0, status="withdrawn")
    images = _request(4, model="sd", n_out=56, images=2)
    with db.repos() as r:
        r.requests.insert_many([original, sparse, images])
    with db.reader() as r:
        assert r.requests.get(request_id=original.id) == original
        assert r.requests.get(request_id="bare") == sparse
        assert r.requests.get(request_id=images.id) == images
        assert r.requests.get(request_id="missing") is None


def test_list_filters_and_orders_newest_first(db: Database) -> None:
    rows = [
        _request(1),
        _request(2, tenant="beta"),
        _request(3, agent="coder"),
        _request(4, status="timeout"),
        _request(5),
    ]
    with db.repos() as r:
        r.requests.insert_many(rows)
    with db.reader() as r:
        assert [x.id for x in r.requests.list(tenant="acme")] == [
            "req-00005", "req-00004", "req-00003", "req-00001",
        ]  # fmt: skip
        assert [x.id for x in r.requests.list(agent="coder")] == ["req-00003"]
        assert [x.id for x in r.requests.list(status="timeout")] == ["req-00004"]
        assert [x.id for x in r.requests.list(since=1_002.0, until=1_004.0)] == [
            "req-00003", "req-00002",
        ]  # fmt: skip
        assert len(r.requests.list(limit=2)) == 2
        assert r.requests.count(tenant="beta") == 1
        assert r.requests.count(since=1_004.0) == 2


def test_ran_only_filters_before_the_limit(db: Database) -> None:
    """Served rows, and failed rows once dispatched, ran; a row withdrawn from the queue did
    not, and the newest rows being such withdrawals leaves `limit` rows that ran."""
    ran = [_request(0), _request(1, status="error", error="worker 500")]
    never = [_request(10 + i, status="timeout", dispatched_at=None) for i in range(5)]
    with db.repos() as r:
        r.requests.insert_many(ran + never)
    with db.reader() as r:
        assert [x.id for x in r.requests.list(ran_only=True, limit=2)] == [
            "req-00001",
            "req-00000",
        ]
        assert len(r.requests.list(limit=2)) == 2


def test_usage_for_tenant_counts_only_that_tenant_since_a_time(db: Database) -> None:
    rows = [_request(i) for i in range(10)] + [_request(i, tenant="beta") for i in range(10, 13)]
    with db.repos() as r:
        r.requests.insert_many(rows)
    with db.reader() as r:
        usage = r.requests.usage_for_tenant(tenant="acme", since=1_005.0)
        assert (usage.requests, usage.n_out) == (5, 100)
        assert usage.n_in == sum(100 + i for i in range(5, 10))
        assert usage.unified_service == pytest.approx(sum(140.0 + i for i in range(5, 10)))
        empty = r.requests.usage_for_tenant(tenant="nobody", since=0.0)
        assert (empty.requests, empty.n_in, empty.unified_service) == (0, 0, 0.0)


def test_invalid_rows_are_refused_before_writing(db: Database) -> None:
    with db.repos() as r:
        with pytest.raises(InvalidValueError):
            r.requests.insert_many([_request(1), _request(2, status="lost")])
        with pytest.raises(InvalidValueError):
            r.requests.insert_many([_request(1, id="x" * 65)])
        assert r.requests.count() == 0


def test_service_by_kind_joins_the_registry_in_a_window(db: Database) -> None:
    """Two tenants on an llm, a vlm and an unregistered model: sums per (tenant, kind), the
    unregistered model counted as llm, shares summing to 1 per kind, [since, until) honoured."""
    rows = [
        _request(1, model="llama", n_in=100, n_out=10, unified_cost=120.0),
        _request(2, model="llama", n_in=50, n_out=5, unified_cost=60.0, status="error"),
        _request(3, model="llava", n_in=400, n_out=20, unified_cost=900.0),
        _request(4, model="mystery", n_in=30, n_out=3, unified_cost=20.0, status="withdrawn"),
        _request(5, tenant="beta", model="llama", n_in=70, n_out=7, unified_cost=100.0),
        _request(6, tenant="beta", model="llava", n_in=200, n_out=10, unified_cost=300.0),
        _request(0, model="llava", unified_cost=5_000.0),  # arrival 1000.0: before `since`
        _request(9, tenant="beta", model="llama", unified_cost=7_000.0),  # arrival == until
    ]
    with db.repos() as r:
        r.models.upsert(name="llama", kind="llm", hidden_size=4096, num_layers=32)
        r.models.upsert(name="llava", kind="vlm", hidden_size=4096, num_layers=32)
        r.requests.insert_many(rows)
    with db.reader() as r:
        got = r.requests.service_by_kind(since=1_001.0, until=1_009.0)
    table = {(s.tenant, s.kind): s for s in got}
    assert [(s.tenant, s.kind) for s in got] == [
        ("acme", "llm"), ("acme", "vlm"), ("beta", "llm"), ("beta", "vlm"),
    ]  # fmt: skip
    acme_llm = table["acme", "llm"]  # llama ×2 + the unregistered "mystery"
    assert (acme_llm.requests, acme_llm.n_in, acme_llm.n_out) == (3, 180, 18)
    assert acme_llm.unified_service == pytest.approx(200.0)
    assert (table["acme", "vlm"].requests, table["acme", "vlm"].n_in) == (1, 400)
    assert table["beta", "llm"].unified_service == pytest.approx(100.0)
    assert acme_llm.share == pytest.approx(200.0 / 300.0)
    assert table["beta", "vlm"].share == pytest.approx(300.0 / 1200.0)
    for kind in ("llm", "vlm"):
        assert sum(s.share for s in got if s.kind == kind) == pytest.approx(1.0)
    with db.reader() as r:
        assert r.requests.service_by_kind(since=2_000.0, until=3_000.0) == []
