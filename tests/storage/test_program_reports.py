"""Program-level report from the request rows (SQLite and PostgreSQL): the same numbers as the
simulator's `workflow_metrics` on the same requests; period membership by first arrival."""

from __future__ import annotations

import pytest

from storage.db import Database
from storage.errors import InvalidValueError
from storage.program_reports import WorkflowTotals, latency_stats, program_report
from storage.records import RequestRecord
from storage.repos import program_report_from_requests
from storage.repos.program_reports import workflow_totals
from tests.storage.program_rows import (
    SINCE,
    UNTIL,
    assert_same_as_simulator,
    make_workflow_rows,
    simulator_metrics,
)


def test_report_equals_the_simulators_program_metrics(db: Database) -> None:
    rows = make_workflow_rows()
    with db.repos() as r:
        r.requests.insert_many(rows)
    with db.reader() as r:
        report = program_report_from_requests(r.session, since=SINCE, until=UNTIL)
    expected = simulator_metrics(rows, SINCE, UNTIL)
    assert len(expected) == 3 and all(a["completed"] > 3 for a in expected.values())
    assert any(a["workflows"] > a["completed"] for a in expected.values())
    assert_same_as_simulator(report.to_json()["data"], expected)
    with db.reader() as r:
        acme = program_report_from_requests(r.session, since=SINCE, until=UNTIL, tenant="acme")
    assert [a.key for a in acme.apps] == ["acme/chat", "acme/docs"]
    assert acme.apps == report.apps[:2]


def test_a_workflow_belongs_to_the_period_of_its_first_call(db: Database) -> None:
    """Started before the period: not counted, though its later calls arrive inside it;
    started inside: every call counts, the one arriving after the period too."""
    calls = [
        ("early", SINCE - 5.0, SINCE - 1.0, 10),
        ("early", SINCE + 1.0, SINCE + 4.0, 10),
        ("inside", SINCE + 100.0, SINCE + 102.0, 30),
        ("inside", UNTIL + 50.0, UNTIL + 60.0, 20),
        ("late", UNTIL + 1.0, UNTIL + 2.0, 5),
    ]
    rows = [
        RequestRecord(id=f"c{i}", tenant="t", app="a", workflow=wf, arrival=arrival,
                      finished_at=finished, status="ok", n_out=n_out)
        for i, (wf, arrival, finished, n_out) in enumerate(calls)
    ]  # fmt: skip
    with db.repos() as r:
        r.requests.insert_many(rows)
    with db.reader() as r:
        totals = workflow_totals(r.session, since=SINCE, until=UNTIL)
        (app,) = program_report_from_requests(r.session, since=SINCE, until=UNTIL).apps
    assert totals == [WorkflowTotals("t", "a", "inside", 2, 0, SINCE + 100.0, UNTIL + 60.0, 50)]
    e2e = UNTIL + 60.0 - (SINCE + 100.0)
    assert (app.workflows, app.completed, app.calls_per_workflow) == (1, 1, 2.0)
    assert app.e2e_s.mean == pytest.approx(e2e) and app.e2e_s.p99 == pytest.approx(e2e)
    assert app.token_latency_s.p90 == pytest.approx(e2e / 50)


def test_failed_or_unfinished_workflows_count_but_stay_out_of_the_statistics() -> None:
    totals = [
        WorkflowTotals("t", "a", "ok", 2, 0, 10.0, 14.0, 0),  # no tokens: divides by 1
        WorkflowTotals("t", "a", "failed", 3, 1, 10.0, 99.0, 100),
        WorkflowTotals("t", "a", "running", 1, 1, 10.0, None, 0),
    ]
    (app,) = program_report(totals, 0.0, 100.0).apps
    assert (app.workflows, app.completed, app.calls_per_workflow) == (3, 1, 2.0)
    assert app.e2e_s.mean == 4.0 and app.token_latency_s.mean == 4.0
    (nothing,) = program_report(totals[1:], 0.0, 100.0).apps
    assert nothing.completed == 0 and nothing.calls_per_workflow is None
    assert nothing.e2e_s == latency_stats([])


def test_percentiles_interpolate_between_ranks() -> None:
    stats = latency_stats([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0])
    assert (stats.mean, stats.p90, stats.p95, stats.p99) == pytest.approx((6.0, 10.0, 10.5, 10.9))


def test_empty_period_is_refused(db: Database) -> None:
    with db.reader() as r, pytest.raises(InvalidValueError):
        program_report_from_requests(r.session, since=SINCE, until=SINCE)
