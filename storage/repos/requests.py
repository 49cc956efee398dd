"""Request history: one row per request id, written in idempotent batches."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, get_args

from sqlalchemy import ColumnElement, CursorResult, delete, func, or_, select
from sqlalchemy.orm import Session

from storage.dialects import insert_new, lock_rows, update_rows
from storage.errors import InvalidValueError
from storage.models import ModelSpec, RequestRow, table_of
from storage.records import RequestRecord, RequestStatus, RequestsWritten, TenantUsage, record_from
from storage.reports import UNREGISTERED_KIND, KindService, KindTotals, kind_service
from storage.repos.rollups import RollupRepo
from storage.rollup_stats import rollup_deltas

INSERT_CHUNK = 1000
_FIELDS = tuple(f.name for f in dataclasses.fields(RequestRecord))


class RequestRepo:
    """Inserts and reads request rows. `insert_many` is idempotent on the request id and, in
    the same transaction, adds exactly the newly inserted rows to the fairness rollups — so a
    replayed batch changes neither the rows nor the rollups.

    `write_many` adds one exception, for rows marked provisional (their `error` is the text
    the caller names: the in-flight audit's, for a completion presumed lost): a record that is
    not provisional replaces such a row, and in the same transaction the rollups lose exactly
    what the provisional row added to them and gain what the real one adds — as if only the
    real one had been recorded (counts and histograms exactly; float sums to within their
    rounding, never below zero). A provisional record never replaces anything, and a
    replaced row is real, so a replayed batch still changes nothing. The row is locked before
    it is read (PostgreSQL: `SELECT … FOR UPDATE`, after the insert that found it waited for
    its writer to commit; SQLite: one writer at a time), so concurrent writers replace it
    once."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def insert_many(self, records: Iterable[RequestRecord], *, rollups: bool = True) -> int:
        """Insert the records whose id is new (first one wins within the batch); → how many."""
        return self.write_many(records, provisional=None, rollups=rollups).inserted

    def write_many(
        self, records: Iterable[RequestRecord], *, provisional: str | None, rollups: bool = True
    ) -> RequestsWritten:
        """Insert the records whose id is new and replace the provisional rows (`error` ==
        `provisional`) a real record of theirs arrived for; → what was done. Within the batch
        the first real record of an id wins, else its first record."""
        batch = _unique(records, provisional)
        inserted: set[str] = set()
        table = table_of(RequestRow)
        for start in range(0, len(batch), INSERT_CHUNK):
            chunk = batch[start : start + INSERT_CHUNK]
            new = insert_new(self.session, table, [_columns(rec) for rec in chunk])
            inserted.update(key for (key,) in new)
        replaced = []
        if provisional is not None:
            found = [r for r in batch if r.id not in inserted and r.error != provisional]
            replaced = self._replace(found, provisional)
        if rollups and (inserted or replaced):
            added = [r for r in batch if r.id in inserted] + [new for _, new in replaced]
            RollupRepo(self.session).add_many(
                rollup_deltas(added), removed=rollup_deltas(old for old, _ in replaced)
            )
        return RequestsWritten(len(inserted), tuple(new.id for _, new in replaced))

    def _replace(
        self, records: list[RequestRecord], provisional: str
    ) -> list[tuple[RequestRecord, RequestRecord]]:
        """Overwrite the stored rows of `records` that are provisional; → (old, new) pairs."""
        if not records:
            return []
        table = table_of(RequestRow)
        by_id = {rec.id: rec for rec in records}
        locked = lock_rows(self.session, table, [(rid,) for rid in sorted(by_id)])
        pairs = [
            (record_from(RequestRecord, row), by_id[row["id"]])
            for row in locked
            if row["error"] == provisional
        ]
        update_rows(self.session, table, [_columns(new) for _, new in pairs])
        return pairs

    def prune_before(self, *, before: float, limit: int) -> int:
        """Delete at most `limit` rows that arrived before `before`, oldest first; → how many.
        The rollups keep what those rows added to them."""
        oldest = (
            select(RequestRow.id)
            .where(RequestRow.arrival < before)
            .order_by(RequestRow.arrival)
            .limit(limit)
        )
        result = self.session.execute(
            delete(RequestRow).where(RequestRow.id.in_(oldest.scalar_subquery()))
        )
        assert isinstance(result, CursorResult)
        return int(result.rowcount)

    def get(self, *, request_id: str) -> RequestRecord | None:
        """The request row, or None."""
        row = self.session.get(RequestRow, request_id, populate_existing=True)
        return None if row is None else record_from(RequestRecord, row.to_dict())

    def list(
        self,
        *,
        tenant: str | None = None,
        app: str | None = None,
        agent: str | None = None,
        since: float | None = None,
        until: float | None = None,
        status: RequestStatus | None = None,
        ran_only: bool = False,
        limit: int = 100,
    ) -> list[RequestRecord]:
        """Rows with arrival in [since, until), newest first, optionally filtered;
        `ran_only`: only calls a worker took (served, or failed once dispatched), filtered
        before `limit` so that calls which never ran do not take the places of calls that did."""
        conditions = _filters(tenant, app, agent, since, until, status)
        if ran_only:
            conditions.append(or_(RequestRow.status == "ok", RequestRow.dispatched_at.is_not(None)))
        stmt = select(RequestRow).where(*conditions)
        stmt = stmt.order_by(RequestRow.arrival.desc(), RequestRow.id).limit(limit)
        return [record_from(RequestRecord, r.to_dict()) for r in self.session.scalars(stmt)]

    def count(
        self,
        *,
        tenant: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> int:
        """How many rows match."""
        conditions = _filters(tenant, None, None, since, until, None)
        stmt = select(func.count()).select_from(RequestRow).where(*conditions)
        return int(self.session.scalar(stmt) or 0)

    def usage_for_tenant(self, *, tenant: str, since: float) -> TenantUsage:
        """A tenant's request count, tokens and unified service since `since` (exact)."""
        stmt = select(
            func.count(),
            func.coalesce(func.sum(RequestRow.n_in), 0),
            func.coalesce(func.sum(RequestRow.n_out), 0),
            func.coalesce(func.sum(RequestRow.unified_cost), 0.0),
            func.coalesce(func.sum(RequestRow.images), 0),
        ).where(RequestRow.tenant == tenant, RequestRow.arrival >= since)
        count, n_in, n_out, service, images = self.session.execute(stmt).one()
        return TenantUsage(
            tenant=tenant,
            since=since,
            requests=int(count),
            n_in=int(n_in),
            n_out=int(n_out),
            unified_service=float(service),
            images=int(images or 0),
        )

    def service_by_kind(self, *, since: float, until: float) -> Sequence[KindService]:
        """Per (tenant, model kind) with arrival in [since, until): requests, tokens and unified
        service, and the tenant's share of the kind's service. Every row counts, whatever its
        status (as in `usage_for_tenant` and the reports); a model missing from the registry
        counts as kind "llm". Summed in SQL: requests LEFT JOIN models, GROUP BY tenant, kind.
        """
        kind = func.coalesce(ModelSpec.kind, UNREGISTERED_KIND).label("kind")
        stmt = (
            select(
                RequestRow.tenant,
                kind,
                func.count(),
                func.coalesce(func.sum(RequestRow.n_in), 0),
                func.coalesce(func.sum(RequestRow.n_out), 0),
                func.coalesce(func.sum(RequestRow.unified_cost), 0.0),
                func.coalesce(func.sum(RequestRow.images), 0),
            )
            .select_from(RequestRow)
            .outerjoin(ModelSpec, ModelSpec.name == RequestRow.model)
            .where(*_filters(None, None, None, since, until, None))
            .group_by(RequestRow.tenant, kind)
        )
        return kind_service(
            KindTotals(tenant, str(k), int(c), int(n_in), int(n_out), float(u), int(images or 0))
            for tenant, k, c, n_in, n_out, u, images in self.session.execute(stmt)
        )


def _unique(records: Iterable[RequestRecord], provisional: str | None) -> list[RequestRecord]:
    """One record per id, checked: its first real one, else its first one; in id order (the
    order in which every writer locks rows)."""
    unique: dict[str, RequestRecord] = {}
    for rec in records:
        _check(rec)
        held = unique.get(rec.id)
        if held is None or (provisional and held.error == provisional != rec.error):
            unique[rec.id] = rec
    return [unique[rid] for rid in sorted(unique)]


def _check(rec: RequestRecord) -> None:
    if rec.status not in get_args(RequestStatus):
        raise InvalidValueError(f"request {rec.id!r}: unknown status {rec.status!r}")
    if not rec.id or len(rec.id) > 64:
        raise InvalidValueError(f"request id must be 1–64 characters, got {rec.id!r}")


def _columns(rec: RequestRecord) -> dict[str, Any]:
    return {name: getattr(rec, name) for name in _FIELDS}


def _filters(
    tenant: str | None,
    app: str | None,
    agent: str | None,
    since: float | None,
    until: float | None,
    status: str | None,
) -> list[ColumnElement[bool]]:
    pairs: Sequence[tuple[Any, object]] = (
        (RequestRow.tenant, tenant),
        (RequestRow.app, app),
        (RequestRow.agent, agent),
        (RequestRow.status, status),
    )
    conditions = [column == value for column, value in pairs if value is not None]
    if since is not None:
        conditions.append(RequestRow.arrival >= since)
    if until is not None:
        conditions.append(RequestRow.arrival < until)
    return conditions
