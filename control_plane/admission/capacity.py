"""Capacity admission: a concurrency cap per worker plus guards from its scraped metrics."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.admission import Admission
from control_plane.core.job import Job
from control_plane.core.worker_view import WorkerView


class CapacityParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_concurrency: int | None = Field(None, ge=1)
    """Per-worker cap on in-flight requests; None = the worker's `max_num_seqs`."""
    skip_waiting: bool = True
    """Refuse a worker whose scraped metrics show requests waiting inside the engine."""
    kv_usage_max: float = Field(0.95, ge=0.0, le=1.0)
    """Refuse a worker whose scraped KV usage is above this."""
    token_fence: float | None = Field(None, gt=0.0)
    """When set, reserved tokens (prompt + expected output) may not exceed this fraction of
    the worker's KV capacity."""
    preemption_cooldown_s: float = Field(0.0, ge=0.0)
    """No dispatch to a worker for this long after it reported a preemption."""


class CapacityAdmission(Admission):
    """Admit while `inflight < cap`, the engine queue is empty and KV usage is below the knob.

    Guarantee: the scheduler never holds more than `cap` requests on a worker, so the engine's
    own queue stays short and ordering decisions stay with the policy. A worker with nothing
    in flight always admits (when healthy), so an oversized request cannot wait forever.
    """

    name: ClassVar[str] = "capacity"
    Params: ClassVar[type[BaseModel]] = CapacityParams

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        assert isinstance(self.params, CapacityParams)
        self._cfg: CapacityParams = self.params

    def _p(self) -> CapacityParams:
        return self._cfg

    def cap(self, worker: WorkerView) -> int:
        limit = self._p().max_concurrency
        return worker.max_num_seqs if limit is None else min(limit, worker.max_num_seqs)

    def has_room(self, worker: WorkerView, now: float) -> bool:
        p = self._p()
        if worker.inflight >= self.cap(worker):
            return False
        if worker.inflight == 0:
            return True
        if p.skip_waiting and worker.waiting > 0:
            return False
        if worker.kv_usage > p.kv_usage_max:
            return False
        cooling = worker.last_preemption_at is not None and p.preemption_cooldown_s > 0
        return not (cooling and now - (worker.last_preemption_at or 0.0) < p.preemption_cooldown_s)

    def admit(self, job: Job, worker: WorkerView, now: float) -> bool:
        if not self.has_room(worker, now):
            return False
        fence = self._p().token_fence
        if fence is None or worker.inflight == 0:
            return True
        return worker.inflight_tokens + self.reserve(job) <= fence * worker.kv_tokens
