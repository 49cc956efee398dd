"""Provisional request rows (the in-flight audit's): a real completion recorded after one
replaces it, and the rollups end as if only the real one had been recorded; everything else
stays first-wins. Before, the first row of an id won whatever it was: an audit row recorded
first kept the leader's charged tokens and no latencies for good."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from typing import Any

import pytest
from sqlalchemy import delete, select

from storage.db import Database
from storage.models import FairnessRollup, RequestRow, table_of
from storage.records import RequestRecord
from storage.repos import rollups as rollups_repo

LOST = "completion lost: slot freed by the leader's in-flight audit"
T0 = 1_699_920_000 + 12_345 + 0.25
Rollups = dict[tuple[Any, ...], dict[str, Any]]
FLOATS = {"unified_service", "sum_ttft_ms", "sum_tpot_ms", "sum_e2e_ms", "sum_queue_ms"}


def real(rid: str, **changes: Any) -> RequestRecord:
    """A request's real completion: its tokens, latencies and SLO outcome."""
    base = RequestRecord(
        id=rid, tenant="acme", app="chat", agent="planner", arrival=T0, status="ok",
        model="tiny", dispatched_at=T0 + 0.5, first_token_at=T0 + 0.7, finished_at=T0 + 3.1,
        n_in=120, n_out=57, unified_cost=233.5, slo_ttft_ms=500.0, slo_violated=True,
        ttft_ms=700.0, tpot_ms=42.9, e2e_ms=3100.0, queue_ms=500.0, worker="w1", policy="vtc",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def audit(rid: str, **changes: Any) -> RequestRecord:
    """The in-flight audit's row for the same request: the tokens the leader charged, no
    first token, the hash's status, `error` = the audit's."""
    row = real(rid, first_token_at=None, n_out=200, unified_cost=411.0, slo_violated=False)
    row = dataclasses.replace(row, ttft_ms=None, tpot_ms=None, e2e_ms=9000.0, error=LOST)
    return dataclasses.replace(row, **changes)


def background(n: int = 30) -> list[RequestRecord]:
    """Other requests sharing the rollup rows (same minute, hour and day, same nodes)."""
    return [
        real(f"bg-{i}", arrival=T0 + i, n_out=10 + i, unified_cost=17.25 * i + 0.1,
             ttft_ms=90.0 + i, e2e_ms=1000.0 + 7 * i, agent="planner" if i % 2 else "coder",
             status="ok" if i % 3 else "error", slo_violated=i % 4 == 0)
        for i in range(n)
    ]  # fmt: skip


def write(db: Database, rows: list[RequestRecord]) -> tuple[int, tuple[str, ...]]:
    with db.repos() as r:
        done = r.requests.write_many(rows, provisional=LOST)
    return done.inserted, done.replaced


def snapshot(
    db: Database,
) -> tuple[dict[str, RequestRecord], dict[tuple[Any, ...], dict[str, Any]]]:
    """Every request row, and every rollup row by key."""
    table = table_of(FairnessRollup)
    keys = [c.name for c in table.primary_key.columns]
    with db.reader() as r:
        requests = {row.id: row for row in r.requests.list(limit=10_000)}
        rollups = {
            tuple(row[k] for k in keys): dict(row)
            for row in r.session.execute(select(table)).mappings()
        }
    return requests, rollups


def wipe(db: Database) -> None:
    with db.repos() as r:
        r.session.execute(delete(table_of(RequestRow)))
        r.session.execute(delete(table_of(FairnessRollup)))


def reference(
    db: Database, batches: list[list[RequestRecord]]
) -> tuple[dict[str, RequestRecord], Rollups]:
    """The database as if only these batches had been recorded (wiped first)."""
    wipe(db)
    for rows in batches:
        write(db, rows)
    return snapshot(db)


def assert_same_rollups(got: Rollups, want: Rollups, *, exact: bool) -> None:
    """Every rollup row: the same keys; counts and histograms equal; float sums equal, or
    within their rounding where other requests share the row (`exact=False`)."""
    assert sorted(got) == sorted(want)
    for key, row in got.items():
        for name, value in row.items():
            if name in FLOATS and not exact:
                assert value == pytest.approx(want[key][name], rel=1e-12, abs=1e-9), (key, name)
            else:
                assert value == want[key][name], (key, name)


@pytest.mark.parametrize("others", [False, True], ids=["alone", "shared-rows"])
def test_a_real_completion_after_the_audit_row_replaces_it(db: Database, others: bool) -> None:
    rows = background() if others else []
    if rows:
        write(db, rows)
    assert write(db, [audit("r1")]) == (1, ())
    assert write(db, [real("r1")]) == (0, ("r1",))
    got_requests, got_rollups = snapshot(db)
    assert got_requests["r1"] == real("r1")

    want_requests, want_rollups = reference(db, [rows, [real("r1")]] if rows else [[real("r1")]])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=not others)


def test_rollup_rows_only_the_audit_row_made_are_deleted(db: Database) -> None:
    """The audit row named another agent (and minute): its own rollup rows are gone, the
    shared ones (tenant, app; hour, day) hold only the real completion."""
    write(db, background(4))
    write(db, [audit("r1", agent="ghost", arrival=T0 + 600)])
    assert write(db, [real("r1")]) == (0, ("r1",))
    got_requests, got_rollups = snapshot(db)
    assert not any(key[-1] == "ghost" for key in got_rollups)
    want_requests, want_rollups = reference(db, [background(4), [real("r1")]])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=False)


def test_the_audit_row_after_the_real_one_changes_nothing(db: Database) -> None:
    write(db, background())
    write(db, [real("r1")])
    before = snapshot(db)
    assert write(db, [audit("r1")]) == (0, ())
    assert snapshot(db) == before


def test_redeliveries_after_a_replacement_change_nothing(db: Database) -> None:
    write(db, background())
    write(db, [audit("r1"), audit("r2")])
    assert write(db, [real("r1"), real("r2")]) == (0, ("r1", "r2"))
    after = snapshot(db)
    assert write(db, [real("r1"), real("r2")]) == (0, ())  # the real ones again
    assert write(db, [audit("r1"), audit("r2")]) == (0, ())  # the audit's again
    assert write(db, [real("r2"), audit("r1"), *background()]) == (0, ())
    assert snapshot(db) == after


@pytest.mark.parametrize("order", ["audit-first", "real-first"])
def test_within_one_batch_the_real_completion_wins(db: Database, order: str) -> None:
    batch = [audit("r1"), real("r1")] if order == "audit-first" else [real("r1"), audit("r1")]
    assert write(db, batch) == (1, ())
    got = snapshot(db)
    assert got == reference(db, [[real("r1")]])


def test_an_audit_row_is_replaced_once_and_only_by_a_real_completion(db: Database) -> None:
    """A second audit completion never replaces the first; a later real completion replaces
    the row once, and a second real one (another outcome) is ignored: first real one wins."""
    write(db, [audit("r1")])
    assert write(db, [audit("r1", n_out=999)]) == (0, ())
    assert write(db, [real("r1")]) == (0, ("r1",))
    assert write(db, [real("r1", n_out=1, status="error")]) == (0, ())
    assert snapshot(db) == reference(db, [[real("r1")]])


def test_without_a_provisional_marker_the_first_row_wins_as_before(db: Database) -> None:
    with db.repos() as r:
        assert r.requests.insert_many([audit("r1")]) == 1
        assert r.requests.insert_many([real("r1")]) == 0
    assert snapshot(db)[0]["r1"] == audit("r1")


def _hold_open(db: Database, rows: list[RequestRecord], held: threading.Event,
               release: threading.Event) -> None:  # fmt: skip
    with db.repos() as r:
        r.requests.write_many(rows, provisional=LOST)
        held.set()
        assert release.wait(30)


@pytest.mark.parametrize(
    "first,second",
    [("audit", "real"), ("real", "audit"), ("replacing", "real")],
)
def test_racing_writers_end_with_the_real_row_once(db: Database, first: str, second: str) -> None:
    """Writer A's transaction is open (its row uncommitted, or the audit row locked as A
    replaces it) when writer B writes the same id; B waits (PostgreSQL: on A's insert or row
    lock; SQLite: for the write lock) and then sees A's commit. Whatever the order, the row is
    the real one and the rollups those of recording it alone."""
    write(db, background())
    if first == "replacing":
        write(db, [audit("r1")])
    rows = {"audit": [audit("r1")], "real": [real("r1")], "replacing": [real("r1")]}
    held, release = threading.Event(), threading.Event()
    a = threading.Thread(target=_hold_open, args=(db, rows[first], held, release))
    a.start()
    assert held.wait(30)
    result: list[tuple[int, tuple[str, ...]]] = []
    b = threading.Thread(target=lambda: result.append(write(db, rows[second])))
    b.start()
    try:
        time.sleep(0.5)
        waited = b.is_alive()
    finally:
        release.set()
        a.join(30)
        b.join(30)
    assert waited, "the second writer did not wait for the first"
    assert result == [(0, ("r1",) if (first, second) == ("audit", "real") else ())]
    got_requests, got_rollups = snapshot(db)
    assert got_requests["r1"] == real("r1")
    want_requests, want_rollups = reference(db, [background(), [real("r1")]])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=False)


def test_an_addition_to_a_row_a_replacement_deleted_meanwhile_is_kept(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: writer B's insert finds the audit row's own rollup rows (agent `ghost`),
    then writer A replaces the audit row, deleting those rows (they count no request any
    more), and commits before B locks them: B inserts them afresh instead of losing its count.
    """
    if db.dialect != "postgresql":
        pytest.skip("SQLite has one writer at a time: the interleaving cannot happen")
    write(db, [audit("r1", agent="ghost")])
    inserted, replaced = threading.Event(), threading.Event()
    real_lock = rollups_repo.lock_rows

    def lock_after_the_replacement(*args: Any) -> Any:
        if threading.current_thread() is b and not inserted.is_set():
            inserted.set()
            assert replaced.wait(30)
        return real_lock(*args)

    monkeypatch.setattr(rollups_repo, "lock_rows", lock_after_the_replacement)
    ghost = real("bg-ghost", agent="ghost", n_out=3)
    b = threading.Thread(target=write, args=(db, [ghost]))
    b.start()
    assert inserted.wait(30)
    assert write(db, [real("r1")]) == (0, ("r1",))
    replaced.set()
    b.join(30)
    got_requests, got_rollups = snapshot(db)
    want_requests, want_rollups = reference(db, [[ghost], [real("r1")]])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=False)


def test_a_row_made_again_meanwhile_does_not_deadlock_two_adders(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: writer A's insert finds the audit row's own rollup rows (agent `ghost`,
    first in key order); a replacement deletes them; writer D makes them again (uncommitted)
    and waits to lock the shared rows A locks next. A must not then wait for D's new rows
    while holding those locks: it did (re-inserting only the vanished rows), a deadlock
    PostgreSQL broke by failing one of the two batches."""
    if db.dialect != "postgresql":
        pytest.skip("SQLite has one writer at a time: the interleaving cannot happen")
    write(db, [audit("r1", agent="ghost")])
    gates: dict[threading.Thread, tuple[threading.Event, threading.Event]] = {}
    real_lock = rollups_repo.lock_rows

    def lock_when_told(*args: Any) -> Any:
        gate = gates.pop(threading.current_thread(), None)
        if gate is not None:  # its first lock: say it is there, wait to be let through
            gate[0].set()
            assert gate[1].wait(30)
        return real_lock(*args)

    monkeypatch.setattr(rollups_repo, "lock_rows", lock_when_told)
    errors: list[Exception] = []

    def writer(rows: list[RequestRecord]) -> None:
        try:
            write(db, rows)
        except Exception as exc:  # surfaced below: a thread cannot fail the test itself
            errors.append(exc)

    rows_a, rows_d = [real("a", agent="ghost")], [real("d", agent="ghost", n_out=3)]
    a = threading.Thread(target=writer, args=(rows_a,))
    d = threading.Thread(target=writer, args=(rows_d,))
    at_a, go_a = gates[a] = (threading.Event(), threading.Event())
    at_d, go_d = gates[d] = (threading.Event(), threading.Event())
    a.start()
    assert at_a.wait(30)
    assert write(db, [real("r1")]) == (0, ("r1",))  # the ghost rows go
    d.start()
    assert at_d.wait(30)  # D made the ghost rows again, uncommitted
    go_a.set()
    time.sleep(0.5)  # A locks the shared rows and finds the ghost rows gone
    go_d.set()
    a.join(30)
    d.join(30)
    assert errors == []
    got_requests, got_rollups = snapshot(db)
    want_requests, want_rollups = reference(db, [rows_a, rows_d, [real("r1")]])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=False)


def test_writers_splitting_redelivered_events_end_as_recording_the_real_rows(
    db: Database,
) -> None:
    """Three writers share out every request's audit row and real completion (each twice, in
    any order, in batches of any size), as recorders splitting a stream with redeliveries do:
    every row is the real one and every rollup row that of recording only the real ones."""
    rng = random.Random(5)
    ids = [f"r{i:02d}" for i in range(40)]
    spread = {rid: dict(arrival=T0 + rng.random() * 7200, agent=rng.choice("xyz")) for rid in ids}
    reals = [real(rid, n_out=5 + i, **spread[rid]) for i, rid in enumerate(ids)]
    audits = [audit(rid, **spread[rid]) for rid in ids]
    events = [*reals, *audits, *reals, *audits]
    rng.shuffle(events)
    shares = [events[i::3] for i in range(3)]
    errors: list[Exception] = []

    def writer(rows: list[RequestRecord]) -> None:
        try:
            while rows:
                size = rng.randint(1, 8)
                write(db, rows[:size])
                rows = rows[size:]
        except Exception as exc:  # surfaced below: a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(share,)) for share in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    got_requests, got_rollups = snapshot(db)
    want_requests, want_rollups = reference(db, [reals])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=False)


def test_a_rollup_row_pruned_since_the_audit_row_loses_nothing_of_others(db: Database) -> None:
    """The minute rows were pruned after the audit row was recorded, and a later request made
    its minute row again: that row never held the audit row's delta, so nothing is taken out
    of it (before the check, its histogram went below zero and the real row was refused)."""
    write(db, [audit("r1", ttft_ms=300.0)])
    with db.repos() as r:
        r.rollups.prune(window_s=60, before=T0 + 86_400)
    later = real("later", arrival=T0 + 1)
    write(db, [later])
    assert write(db, [real("r1")]) == (0, ("r1",))
    got_requests, got_rollups = snapshot(db)
    want_requests, want_rollups = reference(db, [[later], [real("r1")]])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=False)


def test_float_sums_never_go_below_zero(db: Database) -> None:
    """Two audit rows (0.3 and 0.6 UT charged, end-to-end measured) replaced one at a time
    by real completions that served nothing and measured no end-to-end latency: the sums
    come back to exactly zero, as recording only the real rows. Before, 0.3 + 0.6 − 0.3 − 0.6
    left −1.1e-16 in every rollup row: negative service, and a series window where nobody was
    served got Jain's index 1.0 instead of none."""
    charged = [audit(rid, unified_cost=c, e2e_ms=c) for rid, c in (("p1", 0.3), ("p2", 0.6))]
    write(db, charged)
    nothing: dict[str, Any] = dict(unified_cost=0.0, n_in=0, n_out=0, e2e_ms=None, status="error")
    assert write(db, [real("p1", **nothing)]) == (0, ("p1",))
    assert write(db, [real("p2", **nothing)]) == (0, ("p2",))
    got_requests, got_rollups = snapshot(db)
    assert all(row["unified_service"] == row["sum_e2e_ms"] == 0.0 for row in got_rollups.values())
    with db.reader() as r:
        report = r.rollups.report(start=T0 - 60, end=T0 + 60, level="tenant", step=60)
    assert report.node("acme").unified_service == 0.0
    assert all(point.jain_service is None for point in report.series)
    want_requests, want_rollups = reference(db, [[real("p1", **nothing), real("p2", **nothing)]])
    assert got_requests == want_requests
    assert_same_rollups(got_rollups, want_rollups, exact=True)
