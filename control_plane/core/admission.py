"""The admission interface: may this worker take this job now?"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from control_plane.core.job import Job, Outcome
from control_plane.core.policy import NoParams
from control_plane.core.worker_view import WorkerView


class Admission(ABC):
    """Gates dispatch per (job, worker); pure apart from its own learned state.

    `admit` must imply `has_room`; `reserve(job)` is the number of KV tokens a dispatch of
    `job` adds to the worker's `inflight_tokens` (the scheduler keeps it with the in-flight
    record and subtracts it when the job ends).
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params = params if params is not None else self.Params()

    @abstractmethod
    def admit(self, job: Job, worker: WorkerView, now: float) -> bool:
        """True when `worker` may start `job` now."""

    def has_room(self, worker: WorkerView, now: float) -> bool:
        """Job-independent pre-check: False means no job at all would be admitted."""
        return True

    def reserve(self, job: Job) -> int:
        """KV tokens the job is expected to hold: prompt plus predicted output."""
        return job.n_in + job.expected_out

    def observe(self, now: float, workers: Sequence[WorkerView]) -> None:  # noqa: B027
        """Called once per scheduling cycle with every worker (feedback loops)."""

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:  # noqa: B027
        """A dispatched job ended (calibration)."""

    def snapshot(self) -> dict[str, Any]:
        return {"name": self.name, "params": self.params.model_dump(mode="json")}

    def restore(self, snapshot: dict[str, Any]) -> None:  # noqa: B027 - optional
        """Reload learned state saved by `snapshot`."""
