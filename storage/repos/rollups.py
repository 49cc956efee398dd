"""Fairness rollups: upsert-add of per-node deltas, and reports read from them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from sqlalchemy import BigInteger, CursorResult, and_, cast, func, or_, select, tuple_
from sqlalchemy.orm import Session

from storage.dialects import insert_new, lock_rows, update_rows
from storage.errors import InvalidValueError
from storage.latency_sketch import DenseHistogram
from storage.models import FairnessRollup, table_of
from storage.records import LEVELS, Level
from storage.report_windows import (
    DAY,
    MINUTE,
    check_step,
    cover,
    minute_range,
    moment,
    past_horizon,
    series_step,
)
from storage.reports import (
    DEFAULT_ALPHA,
    NodeLatency,
    Path,
    Percentiles,
    Report,
    WindowTotals,
    assemble_report,
)
from storage.repos.raw_reports import report_from_requests
from storage.repos.rollup_horizons import horizon_of, raise_horizon
from storage.rollup_stats import COUNTERS, HISTOGRAMS, Counters, NodeStats, RollupKey, node_path

KEY_COLUMNS: Final = RollupKey._fields
CHUNK = 1000
_TABLE = table_of(FairnessRollup)
_Change = tuple[RollupKey, NodeStats | None, NodeStats | None]
"""A key, what to add to its row and what to take back out of it."""


class MinuteRow(NamedTuple):
    """What one node's requests that arrived in one minute did (see `FairnessRollup`)."""

    minute: int
    path: Path
    service: float
    requests: int
    tokens: int
    violations: int
    finished: int


class RollupRepo:
    """Per-minute, per-hour and per-day totals per node. `add_many` adds deltas to rows
    (upsert-add, safe under concurrent writers) and takes back those of replaced request rows
    (exactly for counts and histograms); `report` merges the fewest aligned rows covering a
    range.

    A report's totals and percentiles always read the coarsest rows that exactly cover its
    range (days inside, hours then minutes only at the ragged edges), whatever its series step;
    only the series reads rows as fine as its step. Both are exact partitions of the same
    range, so counts and histograms are those of every minute row; float sums differ from a
    minute-by-minute sum only by rounding order, and no longer depend on the step.

    Minute rows before the minute horizon may be pruned (`prune`, `storage/retention.py`):
    a report's edges there are widened to the hour, and its series takes no step finer than
    an hour there (see `storage.report_windows`), so it reads hour and day rows only before
    the horizon and stays an exact partition of the range it returns. A report reads the
    horizon and the rows in one snapshot (`Database.reader`), and the horizon is committed
    before any row under it is deleted, so no report ever sees a half-pruned edge."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def add_many(
        self,
        deltas: Mapping[RollupKey, NodeStats],
        *,
        removed: Mapping[RollupKey, NodeStats] | None = None,
    ) -> int:
        """Add each delta to its row (created if missing), and first take each of `removed`
        back out of its row (what an earlier `add_many` added for a row now replaced: see
        `RequestRepo.write_many`); → number of rows touched.

        New keys are inserted as they are; existing rows are locked, merged in Python and
        written back, so concurrent writers never lose a count. A row left counting no request
        is deleted, as if it had never been added to; a removal from a row that is gone or does
        not hold it (pruned, and made again by later requests) is skipped. One pass over every
        key in one order, so writers never deadlock here: a chunk that finds a row gone
        between its insert and its lock is rolled back to its savepoint and done again.
        """
        removed = removed or {}
        keys = sorted(deltas.keys() | removed.keys())  # one lock order for every writer
        changes = [(key, deltas.get(key), removed.get(key)) for key in keys]
        for start in range(0, len(changes), CHUNK):
            chunk = changes[start : start + CHUNK]
            while not self._apply_chunk(chunk):  # a row vanished between insert and lock
                pass
        return len(keys)

    def _apply_chunk(self, chunk: list[_Change]) -> bool:
        """Apply `chunk` in a savepoint; → False, having applied nothing of it, when a row
        this insert found was deleted before its lock (a concurrent replacement emptied it,
        or the pruning went by): the caller applies the chunk again from its start, so that
        it inserts and locks in key order again. Re-inserting only the vanished rows, while
        holding the locks of the keys after them, deadlocked on PostgreSQL with a writer that
        had made them again and waited for one of those locks."""
        savepoint = self.session.begin_nested()
        rows = [{**key._asdict(), **add.to_columns()} for key, add, _ in chunk if add is not None]
        created = insert_new(self.session, _TABLE, rows)
        pending = {key: (add, sub) for key, add, sub in chunk if key not in created}
        locked = {
            RollupKey(*(row[name] for name in KEY_COLUMNS)): row
            for row in lock_rows(self.session, _TABLE, list(pending))
        }
        if any(add is not None and key not in locked for key, (add, _) in pending.items()):
            savepoint.rollback()  # its inserts and locks go: nobody waits for them any more
            return False
        updates, emptied = [], []
        for key, row in locked.items():  # a removal whose row is gone (pruned) is skipped
            merged = _applied(row, *pending[key])
            if merged.requests == 0:
                emptied.append(key)
            else:
                updates.append({**key._asdict(), **merged.to_columns()})
        update_rows(self.session, _TABLE, updates)
        self._delete(emptied)
        savepoint.commit()
        return True

    def _delete(self, keys: list[RollupKey]) -> None:
        if keys:
            columns = tuple_(*(_TABLE.c[name] for name in KEY_COLUMNS))
            self.session.execute(_TABLE.delete().where(columns.in_(keys)))

    def report(
        self,
        *,
        start: float,
        end: float,
        level: Level,
        tenant: str | None = None,
        step: int | None = None,
        weights: Mapping[str, float] | None = None,
        alpha: float = DEFAULT_ALPHA,
    ) -> Report:
        """The report over [start, end) widened to whole minutes (to whole hours where an edge
        lies before the minute horizon), from the rollups; its span says the widened range.

        `tenant` restricts it to one tenant's nodes; `step` (60, 3600 or 86400 s, default by
        span) is the series resolution only: totals and percentiles come from day rows with
        finer rows at the edges (a one-minute step over a month reads ~30 day rows a node for its
        totals, not 43,200 minute rows); `weights` maps node keys to weights for Jain. A range
        starting before the minute horizon gets at least an hourly series by default, and an
        explicit finer step there is refused (InvalidValueError).
        """
        horizon = self.minute_horizon()
        lo, hi = past_horizon(*minute_range(start, end), horizon)
        step = check_step(series_step(step, lo, hi, horizon), lo, hi)
        whole = _where(lo, hi, DAY, level, tenant)
        stats = self._node_counters(level, whole)
        return assemble_report(
            level=level,
            span=(lo, hi, step),
            source="rollups",
            stats=stats,
            latency=self._node_latency(level, whole, stats),
            windows=self._windows(level, _where(lo, hi, step, level, tenant), step),
            weights=weights,
            alpha=alpha,
        )

    def report_from_requests(
        self,
        *,
        start: float,
        end: float,
        level: Level,
        tenant: str | None = None,
        step: int | None = None,
        weights: Mapping[str, float] | None = None,
        alpha: float = DEFAULT_ALPHA,
    ) -> Report:
        """The same report computed straight from the request rows (exact, slow on long
        ranges): the reference the rollups are checked against."""
        return report_from_requests(
            self.session, start=start, end=end, level=level, tenant=tenant, step=step,
            weights=weights, alpha=alpha,
        )  # fmt: skip

    def _node_counters(self, level: Level, where: Any) -> dict[Path, Counters]:
        c = _TABLE.c
        sums = [cast(func.sum(c[name]), c[name].type).label(name) for name in COUNTERS]
        stmt = select(c.tenant, c.app, c.agent, *sums).where(where)
        return {
            node_path(level, row.tenant, row.app, row.agent): Counters(
                **{name: row._mapping[name] for name in COUNTERS}
            )
            for row in self.session.execute(stmt.group_by(c.tenant, c.app, c.agent))
        }

    def _windows(self, level: Level, where: Any, step: int) -> dict[int, dict[Path, WindowTotals]]:
        c = _TABLE.c
        window = (c.bucket // step).label("window")
        stmt = select(
            c.tenant,
            c.app,
            c.agent,
            window,
            func.sum(c.unified_service),
            cast(func.sum(c.violations), BigInteger),
            cast(func.sum(c.ok + c.failed), BigInteger),
        ).where(where)
        windows: dict[int, dict[Path, WindowTotals]] = {}
        for tenant, app, agent, index, service, violations, finished in self.session.execute(
            stmt.group_by(c.tenant, c.app, c.agent, window)
        ):
            per_node = windows.setdefault(int(index) * step, {})
            per_node[node_path(level, tenant, app, agent)] = WindowTotals(
                service, violations, finished
            )
        return windows

    def _node_latency(
        self, level: Level, where: Any, stats: Mapping[Path, Counters]
    ) -> dict[Path, NodeLatency]:
        c = _TABLE.c
        stored: dict[Path, tuple[list[bytes], ...]] = {path: ([], [], []) for path in stats}
        stmt = select(c.tenant, c.app, c.agent, *(c[name] for name in HISTOGRAMS)).where(where)
        for tenant, app, agent, *blobs in self.session.execute(stmt):
            lists = stored[node_path(level, tenant, app, agent)]
            for target, blob in zip(lists, blobs, strict=True):
                target.append(blob)
        return {path: NodeLatency(*map(_percentiles, lists)) for path, lists in stored.items()}

    def minute_series(
        self,
        *,
        start: float,
        end: float,
        level: Level,
        tenant: str | None = None,
        app: str | None = None,
    ) -> list[MinuteRow]:
        """The minute rows of [start, end) (widened to whole minutes) at `level`, optionally
        of one tenant (and one application), ordered by minute then node. A range starting
        before the minute horizon is refused (InvalidValueError): its pruned minutes would
        read as no traffic."""
        lo, hi = minute_range(start, end)
        horizon = self.minute_horizon()
        if horizon is not None and lo < horizon:
            raise InvalidValueError(
                f"minute rollups before {moment(horizon)} were pruned: no minute series there"
            )
        c = _TABLE.c
        where = _where(lo, hi, 60, level, tenant)
        if app is not None:
            where = and_(where, c.app == app)
        stmt = select(
            c.bucket, c.tenant, c.app, c.agent, c.unified_service, c.requests,
            c.n_in + c.n_out, c.violations, c.ok + c.failed,
        ).where(where)  # fmt: skip
        rows = self.session.execute(stmt.order_by(c.bucket, c.tenant, c.app, c.agent))
        return [
            MinuteRow(int(b), node_path(level, t, a, g), float(s), int(r), int(n), int(v), int(f))
            for b, t, a, g, s, r, n, v, f in rows
        ]

    def minute_horizon(self) -> int | None:
        """The hour-aligned time before which minute rows may have been pruned, or None when
        none ever was."""
        return horizon_of(self.session, MINUTE)

    def raise_minute_horizon(self, horizon: int) -> int:
        """Record that minute rows before `horizon` (hour-aligned) may go; it never moves back.
        Commit this before deleting any of them; → the horizon now stored."""
        return raise_horizon(self.session, MINUTE, horizon)

    def prune(self, *, window_s: int, before: float, limit: int | None = None) -> int:
        """Delete rollup rows of resolution `window_s` older than `before` (e.g. old minutes,
        keeping hours and days), at most `limit` of them, oldest first per level; → rows
        deleted. Deleting minute rows without first raising the minute horizon past them
        (`raise_minute_horizon`) makes the reports whose edges lie there undercount."""
        c = _TABLE.c
        if limit is None:
            where = and_(c.window_s == window_s, c.bucket < before)
            return self._delete_where(where)
        deleted = 0
        key = tuple_(*(c[name] for name in KEY_COLUMNS))
        for level in LEVELS:
            oldest = (
                select(*(c[name] for name in KEY_COLUMNS))
                .where(c.level == level, c.window_s == window_s, c.bucket < before)
                .order_by(c.bucket)
                .limit(limit - deleted)
            )
            deleted += self._delete_where(key.in_(oldest))
            if deleted >= limit:
                break
        return deleted

    def _delete_where(self, where: Any) -> int:
        result = self.session.execute(_TABLE.delete().where(where))
        assert isinstance(result, CursorResult)
        return int(result.rowcount)


def _applied(row: Mapping[str, Any], add: NodeStats | None, sub: NodeStats | None) -> NodeStats:
    """A stored row with `sub` taken out (unless it does not hold it: pruned, and made again
    by later requests since) and `add` added."""
    merged = NodeStats.from_columns(row)
    if sub is not None and merged.holds(sub):
        merged.subtract(sub)
    if add is not None:
        merged.merge(add)
    return merged


def _where(lo: int, hi: int, step: int, level: Level, tenant: str | None) -> Any:
    c = _TABLE.c
    pieces = cover(lo, hi, step)
    in_range = or_(*(and_(c.window_s == w, c.bucket >= a, c.bucket < b) for w, a, b in pieces))
    condition = and_(c.level == level, in_range)
    return condition if tenant is None else and_(condition, c.tenant == tenant)


def _percentiles(stored: list[bytes]) -> Percentiles | None:
    hist = DenseHistogram()
    hist.merge_many(stored)
    p50, p95, p99 = (hist.quantile(q) for q in (0.5, 0.95, 0.99))
    if p50 is None or p95 is None or p99 is None:
        return None
    return Percentiles(p50, p95, p99)
