"""KV-aware placement: the worker with the most KV headroom after taking the job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from control_plane.core.job import Job
from control_plane.core.placement import Placement
from control_plane.core.worker_view import WorkerView


class KvAwareParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    preemption_cooldown_s: float = Field(10.0, ge=0.0)
    """Workers that reported a preemption this recently are used only if nothing else admits."""


class KvAwarePlacement(Placement):
    """Largest free KV fraction after placement; recently preempting workers last; ties by id.

    Free tokens = capacity − max(reserved in-flight tokens, scraped usage × capacity) − the
    job's prompt and expected output. Guarantee: never prefers a worker that would overflow
    its KV cache over one that would not.
    """

    name: ClassVar[str] = "kv_aware"
    Params: ClassVar[type[BaseModel]] = KvAwareParams

    def _cooling(self, worker: WorkerView, now: float) -> bool:
        assert isinstance(self.params, KvAwareParams)
        at = worker.last_preemption_at
        return at is not None and now - at < self.params.preemption_cooldown_s

    def headroom(self, job: Job, worker: WorkerView) -> float:
        capacity = max(worker.kv_tokens, 1)
        used = max(worker.inflight_tokens, worker.kv_usage * capacity)
        return (capacity - used - job.n_in - job.expected_out) / capacity

    def choose(self, job: Job, workers: Sequence[WorkerView], now: float) -> WorkerView:
        return min(workers, key=lambda w: (self._cooling(w, now), -self.headroom(job, w), w.id))
