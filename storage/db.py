"""The database handle a process opens once: engine, sessions and repositories.

Usage::

    db = Database("sqlite:///./arbiter.db")   # or postgresql+psycopg://…
    db.migrate()
    with db.repos() as r:                      # one transaction, committed on success
        tenant = r.tenants.create_tenant(name="acme", weight=2.0)
        record, key = r.keys.create(tenant="acme")
    with db.reader() as r:                     # read-only: never waits for a writer
        owner = r.keys.resolve(plaintext=key)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from storage.engine import create_engine_for, normalize_url, session_factory
from storage.migrate import SchemaAhead, migrate
from storage.repos import (
    AuditRepo,
    KeyRepo,
    ModelRepo,
    OperatorRepo,
    RequestRepo,
    RollupRepo,
    TenantRepo,
    WorkerRepo,
)

log = logging.getLogger(__name__)

__all__ = ["Database", "Repos", "create_engine_for", "migrate", "session_factory"]


@dataclass(frozen=True, slots=True)
class Repos:
    """Every repository, sharing one session (one transaction)."""

    session: Session
    tenants: TenantRepo
    keys: KeyRepo
    models: ModelRepo
    workers: WorkerRepo
    requests: RequestRepo
    audit: AuditRepo
    rollups: RollupRepo
    operators: OperatorRepo

    @classmethod
    def on(cls, session: Session) -> Repos:
        """The repositories bound to `session`."""
        return cls(
            session=session,
            tenants=TenantRepo(session),
            keys=KeyRepo(session),
            models=ModelRepo(session),
            workers=WorkerRepo(session),
            requests=RequestRepo(session),
            audit=AuditRepo(session),
            rollups=RollupRepo(session),
            operators=OperatorRepo(session),
        )


class Database:
    """An engine and its session factory for one URL. Thread-safe; create one per process
    and `dispose()` it at shutdown. Creating it does not touch the database."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = normalize_url(url)
        self.engine: Engine = create_engine_for(self.url, echo=echo)
        self.sessions: sessionmaker[Session] = session_factory(self.engine)
        self.read_sessions: sessionmaker[Session] = session_factory(self.engine, write=False)

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql'."""
        return self.engine.dialect.name

    def migrate(self) -> None:
        """Bring the schema to this build's latest revision (safe to call from every process).

        A schema a newer build migrated is left as it is, with a warning: migrations keep the
        release before them working (docs/operations.md, "Schema migrations"), so a process
        of that release — an old recorder restarting during a rollout — runs on it."""
        try:
            migrate(self.url)
        except SchemaAhead as exc:
            log.warning("running on a newer schema: %s", exc)

    @contextmanager
    def repos(self) -> Iterator[Repos]:
        """Repositories in one transaction: committed when the block ends, rolled back if it
        raises."""
        with self.sessions.begin() as session:
            yield Repos.on(session)

    @contextmanager
    def reader(self) -> Iterator[Repos]:
        """Repositories for reading only (lookups, reports); whatever is written is rolled
        back. On SQLite it reads a snapshot without taking the write lock."""
        with self.read_sessions() as session:
            try:
                yield Repos.on(session)
            finally:
                session.rollback()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
