"""Telling a database outage from rows the database refuses, for writers that must do
different things about each: retry the first, set the rows aside after the second."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import exc as sa_exc

from storage.db import Database
from storage.errors import RowsRejected, StorageUnavailable
from storage.records import AuditRecord, RequestRecord, RequestsWritten

_OUTAGE: tuple[type[BaseException], ...] = (
    sa_exc.OperationalError,  # connection lost or refused, database locked, disk full
    sa_exc.InterfaceError,
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,  # no pooled connection in time
    ConnectionError,
    TimeoutError,
)
OUTAGE_SQLSTATES = frozenset({"25006", "40001", "40P01", "55P03"})
"""PostgreSQL refusals that meet every row alike until the server or an operator changes:
read-only transaction (a standby after a fail-over, a server set read-only when its disk
fills; psycopg raises it as `InternalError`, not `OperationalError`), serialization failure,
deadlock, lock not available. Not 42501 (insufficient privilege): a row-level security policy
refuses single rows with it; a revoked privilege fails the probe (`probe_writes`) instead."""
OUTAGE_SQLSTATE_CLASSES = frozenset({"08", "53", "57", "58"})
"""Whole classes: connection exception, insufficient resources, operator intervention,
system error."""
PROBE_ID = "__arbiter_write_probe__"


@contextmanager
def classified() -> Iterator[None]:
    """Re-raise errors as `StorageUnavailable` (an outage type) or `RowsRejected` (any other).

    `RowsRejected` only says the write failed for a reason other than an outage; a writer
    confirms that the rows are at fault by writing them alone and `probe_writes` succeeding.
    """
    try:
        yield
    except (StorageUnavailable, RowsRejected):
        raise
    except _OUTAGE as exc:
        raise StorageUnavailable(f"{type(exc).__name__}: {exc}") from exc
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated or _outage_state(exc):
            raise StorageUnavailable(_short(exc)) from exc
        raise RowsRejected(_short(exc)) from exc
    except Exception as exc:  # DataError, IntegrityError, OverflowError, InvalidValueError …
        raise RowsRejected(_short(exc)) from exc


DATABASE_ERRORS: tuple[type[Exception], ...] = (StorageUnavailable, sa_exc.SQLAlchemyError)
"""What a database call may raise that no caller handled: an API renders these itself (an
outage as `is_outage` says, anything else as its own fault), without naming SQLAlchemy."""


SQLITE_OUTAGE_CODES: Final = frozenset({5, 6, 7, 8, 10, 13, 14, 15})
"""SQLite primary result codes that meet every statement alike until the file or the disk
recovers: BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL. Not its generic
ERROR (1): a missing table or column, a syntax error — a fault to report, not to retry."""


def is_outage(exc: BaseException) -> bool:
    """True for a database error that says the database cannot serve now (unreachable,
    locked, read-only, out of resources…), so a caller answers "unavailable, retry" rather
    than reporting a fault: by SQLite's result code or PostgreSQL's SQLSTATE where the driver
    gives one, else by SQLAlchemy's class. Stricter than `classified`, whose writers retry a
    missing table too (until the migration runs); Python's own `ConnectionError` and
    `TimeoutError` are not taken for one (nothing says the database raised them)."""
    if isinstance(exc, StorageUnavailable | sa_exc.DisconnectionError | sa_exc.TimeoutError):
        return True
    if not isinstance(exc, sa_exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    code = getattr(exc.orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in SQLITE_OUTAGE_CODES
    if isinstance(getattr(exc.orig, "sqlstate", None), str):
        return _outage_state(exc)
    return isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError)


def _outage_state(exc: sa_exc.DBAPIError) -> bool:
    state = getattr(exc.orig, "sqlstate", None)
    if not isinstance(state, str):
        return False
    return state in OUTAGE_SQLSTATES or state[:2] in OUTAGE_SQLSTATE_CLASSES


def _short(exc: BaseException) -> str:
    """The error without SQLAlchemy's appended statement and parameters (they can be huge)."""
    text = str(exc).split("\n[SQL:", 1)[0].strip()
    return f"{type(exc.__cause__ or exc).__name__}: {text}"[:1000]


def write_requests(
    db: Database, rows: Sequence[RequestRecord], *, provisional: str | None = None
) -> RequestsWritten:
    """Insert `rows` in one transaction (idempotent on id), a real row replacing a stored
    provisional one (`error` == `provisional`: `RequestRepo.write_many`); → what was done.

    Raises `StorageUnavailable` on an outage and `RowsRejected` when some row is refused.
    """
    with classified(), db.repos() as repos:
        return repos.requests.write_many(rows, provisional=provisional)


def probe_writes(db: Database) -> None:
    """Insert a well-formed request row (and its rollups) and roll it back; raises
    `StorageUnavailable` unless the database is reachable, migrated and takes writes — so a
    refused row is told apart from a database that refuses everything (a read-only server
    answers reads)."""
    probe = RequestRecord(id=PROBE_ID, tenant=PROBE_ID, arrival=0.0, status="ok")
    try:
        with db.repos() as repos:
            repos.requests.insert_many([probe])
            raise _ProbeDone
    except _ProbeDone:
        return
    except Exception as exc:
        raise StorageUnavailable(f"database probe failed: {_short(exc)}") from exc


class _ProbeDone(Exception):
    """Raised inside the probe's transaction so that `Database.repos` rolls it back."""


@dataclass(frozen=True, slots=True)
class AuditDraft:
    """An audit entry to append (`AuditRepo.append`'s arguments)."""

    actor: str
    action: str
    target: str
    old: Any
    new: Any
    reason: str
    at: float


def write_audit(db: Database, drafts: Sequence[AuditDraft]) -> int:
    """Append `drafts` in one transaction, skipping any already there (same actor, action,
    target, time and new value: a replayed event, also by two writers at once: the look and
    the append run under `AuditRepo.exclusive`); → how many were new. Raises as
    `write_requests`."""
    written = 0
    with classified(), db.repos() as repos:
        repos.audit.exclusive()
        for d in drafts:
            # every entry at that exact time: a bounded look at the newest ones since then
            # missed an entry with 100 newer ones of its action (a replay wrote it again)
            seen = repos.audit.at_time(action=d.action, at=d.at)
            if any(_same(e, d) for e in seen):
                continue
            written += 1
            repos.audit.append(
                actor=d.actor,
                action=d.action,
                target=d.target,
                old=d.old,
                new=d.new,
                reason=d.reason,
                at=d.at,
            )
    return written


def _same(entry: AuditRecord, draft: AuditDraft) -> bool:
    return (entry.at, entry.actor, entry.target, entry.new) == (
        draft.at,
        draft.actor,
        draft.target,
        draft.new,
    )
