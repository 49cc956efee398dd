"""The placement interface: which of the admitting workers gets the job."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from control_plane.core.job import Job, Outcome
from control_plane.core.policy import NoParams
from control_plane.core.worker_view import WorkerView


class Placement(ABC):
    """Chooses a worker among those admission accepted for a job; deterministic (ties by id)."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def choose(self, job: Job, workers: Sequence[WorkerView], now: float) -> WorkerView:
        """One of `workers` (never empty: every one of them admits `job`)."""

    def on_dispatch(self, job: Job, worker: WorkerView, now: float) -> None:  # noqa: B027
        """`job` was sent to `worker`."""

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:  # noqa: B027
        """A dispatched job ended."""

    def snapshot(self) -> dict[str, Any]:
        return {"name": self.name, "params": self.params.model_dump(mode="json")}

    def restore(self, snapshot: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Reload state saved by `snapshot`."""
