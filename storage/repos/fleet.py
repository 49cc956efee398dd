"""The model registry and the worker registry."""

from __future__ import annotations

import time
from typing import Any, get_args

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.dialects import insert_for
from storage.errors import AlreadyExistsError, InvalidValueError, NotFoundError
from storage.models import ModelSpec, Worker, table_of
from storage.records import (
    ModelKind,
    ModelRecord,
    WorkerKind,
    WorkerRecord,
    WorkerStatus,
    record_from,
)


class ModelRepo:
    """Served models by name; `upsert` replaces a model's description."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def upsert(
        self,
        *,
        name: str,
        kind: ModelKind = "llm",
        hidden_size: int,
        num_layers: int,
        unified_cost_factor: float | None = None,
        max_model_len: int | None = None,
        image_tokens: dict[str, Any] | None = None,
        generation: dict[str, Any] | None = None,
    ) -> ModelRecord:
        """Create or replace the model `name`."""
        if kind not in get_args(ModelKind):
            raise InvalidValueError(
                f"model kind must be one of {get_args(ModelKind)}, got {kind!r}"
            )
        if hidden_size <= 0 or num_layers <= 0:
            raise InvalidValueError("hidden_size and num_layers must be > 0")
        if unified_cost_factor is not None and not unified_cost_factor > 0:
            raise InvalidValueError("unified_cost_factor must be > 0 or null")
        values = {
            "kind": kind,
            "hidden_size": hidden_size,
            "num_layers": num_layers,
            "unified_cost_factor": unified_cost_factor,
            "max_model_len": max_model_len,
            "image_tokens": image_tokens,
            "generation": generation,
        }
        stmt = insert_for(self.session, table_of(ModelSpec)).values(name=name, **values)
        self.session.execute(stmt.on_conflict_do_update(index_elements=["name"], set_=values))
        record = self.get(name=name)
        assert record is not None
        return record

    def get(self, *, name: str) -> ModelRecord | None:
        """The model, or None."""
        row = self.session.get(ModelSpec, name, populate_existing=True)
        return None if row is None else record_from(ModelRecord, row.to_dict())

    def list(self) -> list[ModelRecord]:
        """Every model, by name."""
        rows = self.session.scalars(select(ModelSpec).order_by(ModelSpec.name))
        return [record_from(ModelRecord, row.to_dict()) for row in rows]

    def delete(self, *, name: str) -> bool:
        """Remove a model; False if it was not registered."""
        row = self.session.get(ModelSpec, name)
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True


class WorkerRepo:
    """Registered workers. Re-registering an id updates its address and shape but keeps its
    drain status, so a restarted worker an operator drained stays drained."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def register(
        self,
        *,
        worker_id: str,
        url: str,
        kind: WorkerKind,
        model: str,
        profile: str | None = None,
        max_num_seqs: int | None = None,
    ) -> WorkerRecord:
        """Add or update a worker; AlreadyExistsError if another worker has `url`."""
        if kind not in get_args(WorkerKind):
            raise InvalidValueError(
                f"worker kind must be one of {get_args(WorkerKind)}, got {kind!r}"
            )
        other = self.session.scalars(select(Worker).where(Worker.url == url)).one_or_none()
        if other is not None and other.id != worker_id:
            raise AlreadyExistsError(f"worker {other.id!r} is already registered at {url}")
        values: dict[str, object] = {
            "url": url,
            "kind": kind,
            "model": model,
            "profile": profile,
            "max_num_seqs": max_num_seqs,
        }
        stmt = insert_for(self.session, table_of(Worker)).values(
            id=worker_id, status="active", registered_at=time.time(), **values
        )
        self.session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_=values))
        return self._require(worker_id)

    def get(self, *, worker_id: str) -> WorkerRecord | None:
        """The worker, or None."""
        row = self.session.get(Worker, worker_id, populate_existing=True)
        return None if row is None else record_from(WorkerRecord, row.to_dict())

    def list(self, *, status: WorkerStatus | None = None) -> list[WorkerRecord]:
        """Workers (optionally only those in `status`), by id."""
        stmt = select(Worker).order_by(Worker.id)
        if status is not None:
            stmt = stmt.where(Worker.status == status)
        return [record_from(WorkerRecord, row.to_dict()) for row in self.session.scalars(stmt)]

    def set_status(self, *, worker_id: str, status: WorkerStatus) -> WorkerRecord:
        """Mark a worker active, draining or drained."""
        if status not in get_args(WorkerStatus):
            raise InvalidValueError(
                f"status must be one of {get_args(WorkerStatus)}, got {status!r}"
            )
        row = self.session.get(Worker, worker_id)
        if row is None:
            raise NotFoundError(f"worker {worker_id!r} is not registered")
        row.status = status
        self.session.flush()
        return record_from(WorkerRecord, row.to_dict())

    def remove(self, *, worker_id: str) -> bool:
        """Forget a worker; False if it was not registered."""
        row = self.session.get(Worker, worker_id)
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True

    def _require(self, worker_id: str) -> WorkerRecord:
        record = self.get(worker_id=worker_id)
        if record is None:
            raise NotFoundError(f"worker {worker_id!r} is not registered")
        return record
