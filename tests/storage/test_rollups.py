"""Rollups: upsert-add under concurrency, and reports from rollups equal reports computed
straight from the request rows (exactly for counts and sums, within 1 % for percentiles)."""

from __future__ import annotations

import random
import threading

import pytest

from storage.db import Database
from storage.errors import InvalidValueError
from storage.latency_sketch import ALPHA
from storage.records import Level, RequestRecord, RequestStatus
from storage.reports import Percentiles, Report
from storage.repos import RollupRepo, raw_reports, report_from_requests
from storage.rollup_stats import NodeStats, RollupKey, rollup_deltas

T0 = 1_699_920_000 + 12_345  # not aligned to a day, an hour or a minute
DAY = 86_400
STATUSES: tuple[RequestStatus, ...] = ("ok", "error", "timeout", "aborted", "withdrawn")


def _requests(n: int, seed: int = 7, span_s: float = 4.5 * DAY) -> list[RequestRecord]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        status = rng.choices(STATUSES, weights=(8, 1, 1, 1, 1))[0]
        started = status not in ("withdrawn", "timeout")
        n_out = rng.randint(1, 400) if started else 0
        ttft = rng.lognormvariate(5.0, 0.8) if started else None
        tpot = rng.lognormvariate(3.2, 0.4) if started and n_out > 1 else None
        rows.append(
            RequestRecord(
                id=f"r{seed}-{i}", tenant=f"t{rng.randint(0, 3)}", app=f"a{rng.randint(0, 1)}",
                agent=f"g{rng.randint(0, 2)}", arrival=T0 + rng.random() * span_s,
                status=status, n_in=rng.randint(10, 4000), n_out=n_out,
                unified_cost=rng.random() * 5000, slo_violated=rng.random() < 0.2,
                ttft_ms=ttft, tpot_ms=tpot,
                e2e_ms=None if ttft is None else ttft + (tpot or 0.0) * n_out,
                queue_ms=rng.expovariate(0.01) if status != "timeout" else None,
            )
        )  # fmt: skip
    return rows


def _close(a: Percentiles | None, b: Percentiles | None) -> None:
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        for approx, exact in ((a.p50, b.p50), (a.p95, b.p95), (a.p99, b.p99)):
            assert abs(approx - exact) <= ALPHA * exact * (1 + 1e-9)


def _near(expected: object) -> object:
    return pytest.approx(expected, rel=1e-9, abs=1e-6)


def assert_reports_agree(fast: Report, exact: Report) -> None:
    assert (fast.level, fast.start, fast.end, fast.step) == (
        exact.level, exact.start, exact.end, exact.step,
    )  # fmt: skip
    assert [n.path for n in fast.nodes] == [n.path for n in exact.nodes]
    for a, b in zip(fast.nodes, exact.nodes, strict=True):
        assert (a.requests, a.ok, a.failed, a.violations, a.n_in, a.n_out) == (
            b.requests, b.ok, b.failed, b.violations, b.n_in, b.n_out,
        )  # fmt: skip
        for name in ("unified_service", "share", "violation_rate", "safi", "weight"):
            assert getattr(a, name) == _near(getattr(b, name)), name
        for name in ("mean_ttft_ms", "mean_tpot_ms", "mean_e2e_ms", "mean_queue_ms"):
            mean_a, mean_b = getattr(a, name), getattr(b, name)
            assert (mean_a is None) == (mean_b is None), name
            if mean_a is not None:
                assert mean_a == _near(mean_b), name
        _close(a.ttft_ms, b.ttft_ms)
        _close(a.tpot_ms, b.tpot_ms)
        _close(a.e2e_ms, b.e2e_ms)
    assert [w.start for w in fast.series] == [w.start for w in exact.series]
    for x, y in zip(fast.series, exact.series, strict=True):
        assert x.service == _near(y.service)
        assert x.violation_rate == _near(y.violation_rate)
        assert (x.jain_service is None) == (y.jain_service is None)  # None: nobody served
        assert x.jain_service == (y.jain_service and _near(y.jain_service))
    for name in ("jain_service", "jain_violation_rate", "jain_safi"):
        assert getattr(fast, name) == _near(getattr(exact, name))


def _load(db: Database, rows: list[RequestRecord], batch: int = 250) -> None:
    for start in range(0, len(rows), batch):
        with db.repos() as r:
            r.requests.insert_many(rows[start : start + batch])
    with db.repos() as r:  # a replayed batch (recorder crashed before its ack) adds nothing
        assert r.requests.insert_many(rows[:batch]) == 0


RANGES = [
    (T0 - 100.0, T0 + 5 * DAY, None),  # everything, day series
    (T0 + DAY + 3 * 3600 + 17 * 60 + 13.5, T0 + 3 * DAY + 5 * 3600 + 43 * 60, None),
    (T0 + 2 * DAY + 7 * 60, T0 + 2 * DAY + 50 * 60, None),  # under an hour: minute series
    (T0 + 5 * 3600, T0 + 2 * DAY + 1234, 3600),  # hour series over two days
]


@pytest.mark.parametrize("level", ["tenant", "app", "agent"])
def test_rollup_reports_equal_reports_from_requests(db: Database, level: Level) -> None:
    _load(db, _requests(3000))
    weights = {"t0": 2.0, "t1": 0.5, "t0/a1": 3.0, "t2/a0/g1": 4.0}
    with db.reader() as r:
        for start, end, step in RANGES:
            fast = r.rollups.report(start=start, end=end, level=level, step=step, weights=weights)
            exact = r.rollups.report_from_requests(
                start=start, end=end, level=level, step=step, weights=weights
            )
            assert fast.source == "rollups" and exact.source == "requests"
            assert sum(n.requests for n in exact.nodes) > 0
            assert_reports_agree(fast, exact)
        one = r.rollups.report(start=RANGES[0][0], end=RANGES[0][1], level=level, tenant="t2")
        assert {n.path[0] for n in one.nodes} == {"t2"}
        assert_reports_agree(
            one,
            report_from_requests(
                r.session, start=RANGES[0][0], end=RANGES[0][1], level=level, tenant="t2"
            ),
        )


def test_report_numbers_match_hand_counts(db: Database) -> None:
    rows = _requests(400, seed=3, span_s=DAY)
    _load(db, rows, batch=100)
    with db.reader() as r:
        report = r.rollups.report(start=T0, end=T0 + DAY + 60, level="tenant")
    for node in report.nodes:
        mine = [x for x in rows if x.tenant == node.path[0]]
        finished = [x for x in mine if x.status != "withdrawn"]
        assert node.requests == len(mine)
        assert node.violations == sum(x.slo_violated for x in finished)
        assert node.ok + node.failed == len(finished)
        assert node.n_out == sum(x.n_out for x in mine)
        assert node.unified_service == pytest.approx(sum(x.unified_cost for x in mine))
    assert sum(n.share for n in report.nodes) == pytest.approx(1.0)
    assert max(n.safi for n in report.nodes) <= 1.0


def test_concurrent_add_many_loses_no_count(db: Database) -> None:
    deltas = rollup_deltas(_requests(60, seed=11, span_s=600))
    rounds, errors = 8, []

    def writer() -> None:
        try:
            for _ in range(rounds):
                with db.repos() as r:
                    r.rollups.add_many(deltas)
        except Exception as exc:  # surfaced below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with db.reader() as r:
        report = r.rollups.report(start=T0, end=T0 + 600, level="agent")
    expected: dict[tuple[str, ...], NodeStats] = {}
    for key, stats in deltas.items():
        if key.level == "agent" and key.window_s == 60:
            expected.setdefault((key.tenant, key.app, key.agent), NodeStats()).merge(stats)
    assert {n.path: n.requests for n in report.nodes} == {
        path: 2 * rounds * s.requests for path, s in expected.items()
    }


def test_add_many_merges_histograms_and_prune_drops_one_resolution(db: Database) -> None:
    key = RollupKey("tenant", 60, T0 // 60 * 60, "t0", "", "")
    a, b = NodeStats(requests=1, n_ttft=1, sum_ttft_ms=10.0), NodeStats(requests=2)
    a.ttft_hist.add(10.0)
    b.ttft_hist.add(10.0, 2)
    b.ttft_hist.add(1000.0)
    with db.repos() as r:
        r.rollups.add_many({key: a, key._replace(window_s=3600, bucket=T0 // 3600 * 3600): a})
    with db.repos() as r:
        r.rollups.add_many({key: b})
    with db.reader() as r:
        node = r.rollups.report(start=T0 - 60, end=T0 + 60, level="tenant").nodes[0]
    assert node.requests == 3
    assert node.ttft_ms is not None and node.ttft_ms.p99 == pytest.approx(1000.0, rel=ALPHA)
    with db.repos() as r:
        assert r.rollups.prune(window_s=60, before=T0 + 60) == 1
    with db.reader() as r:
        assert r.rollups.report(start=T0 - 60, end=T0 + 60, level="tenant").nodes == ()
        hour = T0 // 3600 * 3600  # minutes are gone: an hour series reads the hour rows
        hourly = r.rollups.report(start=hour, end=hour + 3600, level="tenant", step=3600)
        assert [n.requests for n in hourly.nodes] == [1]


def test_bad_report_arguments(db: Database) -> None:
    with db.reader() as r:
        with pytest.raises(InvalidValueError):
            r.rollups.report(start=T0, end=T0, level="tenant")
        with pytest.raises(InvalidValueError):
            r.rollups.report(start=T0, end=T0 + 600, level="tenant", step=120)


@pytest.mark.parametrize("source", ["rollups", "requests"])
def test_a_report_reads_one_snapshot_while_rows_arrive(
    db: Database, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """Regression: on PostgreSQL each query of a report saw whatever had committed by then, so
    a tenant whose first row committed between the counters and the percentiles raised
    KeyError (a 500 on `/admin/nodes`, which the console polls)."""
    rows = _requests(60, seed=5, span_s=600)
    late = [x for x in rows if x.tenant == "t0"]
    early = [x for x in rows if x.tenant != "t0"]
    assert late and early
    _load(db, early)
    target: object = RollupRepo if source == "rollups" else raw_reports
    attribute = "_node_counters" if source == "rollups" else "_totals"
    original = getattr(target, attribute)

    def counted_then_written(*args: object) -> object:
        stats = original(*args)
        with db.repos() as r:  # another process's commit, between two queries of the report
            r.requests.insert_many(late)
        return stats

    monkeypatch.setattr(target, attribute, counted_then_written)
    with db.reader() as r:
        report = (r.rollups.report if source == "rollups" else r.rollups.report_from_requests)(
            start=T0, end=T0 + 601, level="tenant"
        )
    assert {n.path for n in report.nodes} == {(x.tenant,) for x in early}
    assert sum(n.requests for n in report.nodes) == len(early)


def test_an_exact_report_refuses_a_range_with_too_many_rows(db: Database) -> None:
    """An exact report holds every row's latencies in memory, in a gateway: a viewer asking for
    years of rows could exhaust the process that serves tenants."""
    rows = _requests(11, seed=9, span_s=600)
    _load(db, rows)
    window = {"start": T0, "end": T0 + 601, "level": "tenant"}
    with db.reader() as r, pytest.raises(InvalidValueError, match="source=rollups"):
        report_from_requests(r.session, **window, max_rows=10)  # type: ignore[arg-type]
    with db.reader() as r:
        report = report_from_requests(r.session, **window, max_rows=11)  # type: ignore[arg-type]
        unbounded = report_from_requests(r.session, **window, max_rows=None)  # type: ignore[arg-type]
    assert sum(n.requests for n in report.nodes) == 11
    assert unbounded == report
    assert raw_reports.MAX_EXACT_ROWS == 500_000
