"""The placement interface: which of the admitting workers gets the job."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from control_plane.core.job import Job, Outcome
from control_plane.core.policy import NoParams, PolicyContext
from control_plane.core.worker_view import WorkerView


class Placement(ABC):
    """Chooses a worker among those admission accepted for a job; deterministic (ties by id).

    A placement that sets `vetoes` may also refuse a worker (`fits`), as a memory-aware
    dispatcher does: the dispatcher then treats it as admission does, and a job that no worker
    fits stays queued.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    vetoes: ClassVar[bool] = False

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params = params if params is not None else self.Params()

    def bind(self, ctx: PolicyContext) -> None:  # noqa: B027 - optional
        """The policy context (what was learned: latency model, workflows), given once the
        placement joins a dispatcher."""

    def fits(self, job: Job, worker: WorkerView, now: float) -> bool:
        """Whether `job` may go to `worker` now (only asked when `vetoes`)."""
        return True

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
