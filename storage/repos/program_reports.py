"""Program-level metrics from the request rows: one SQL aggregate per workflow, the per
application statistics in Python (`storage.program_reports`, definitions there).

A workflow belongs to [since, until) by its first call's arrival, and every call it issued
counts, whenever it arrived. So the rows cannot simply be cut at `since`: the query first
finds the workflows with a call arriving in the period (the `arrival` index), then sums every
row of those workflows and keeps the groups whose first arrival lies in the period.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, case, func, or_, select
from sqlalchemy.orm import Session

from storage.errors import InvalidValueError
from storage.models import RequestRow
from storage.program_reports import ProgramReport, WorkflowTotals, program_report

R = RequestRow


def _count_where(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def workflow_totals(
    session: Session, *, since: float, until: float, tenant: str | None = None
) -> list[WorkflowTotals]:
    """Per workflow whose first call arrived in [since, until) (optionally one tenant's):
    calls, calls not ended `ok`, first arrival, last finish and output tokens."""
    where = [R.workflow.is_not(None), R.arrival >= since, R.arrival < until]
    if tenant is not None:
        where.append(R.tenant == tenant)
    seen = select(R.tenant, R.app, R.workflow).where(*where).distinct().subquery()
    first = func.min(R.arrival)
    stmt = (
        select(
            R.tenant,
            R.app,
            R.workflow,
            func.count(),
            _count_where(or_(R.status != "ok", R.finished_at.is_(None))),
            first,
            func.max(R.finished_at),
            func.coalesce(func.sum(R.n_out), 0),
        )
        .join(
            seen,
            and_(R.tenant == seen.c.tenant, R.app == seen.c.app, R.workflow == seen.c.workflow),
        )
        .group_by(R.tenant, R.app, R.workflow)
        .having(first >= since, first < until)
    )
    return [
        WorkflowTotals(
            tenant, app, str(workflow), int(calls), int(unfinished), float(arrival),
            None if finished is None else float(finished), int(n_out),
        )
        for tenant, app, workflow, calls, unfinished, arrival, finished, n_out
        in session.execute(stmt)
    ]  # fmt: skip


def program_report_from_requests(
    session: Session, *, since: float, until: float, tenant: str | None = None
) -> ProgramReport:
    """Per application: workflows, completed, calls per workflow, and mean/P90/P95/P99 of
    the end-to-end and program-level token latencies, for workflows started in [since, until).
    """
    if not until > since:
        raise InvalidValueError(f"empty report range [{since}, {until})")
    return program_report(
        workflow_totals(session, since=since, until=until, tenant=tenant), since, until
    )
