"""Round-robin placement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from control_plane.core.job import Job
from control_plane.core.placement import Placement
from control_plane.core.worker_view import WorkerView


class RoundRobinPlacement(Placement):
    """The first admitting worker whose id follows the last chosen one (ids in sorted order).

    Guarantee: among workers that keep admitting, each gets every k-th job (k = their number).
    """

    name: ClassVar[str] = "round_robin"

    def __init__(self, params: BaseModel | None = None) -> None:
        super().__init__(params)
        self._last: str | None = None

    def choose(self, job: Job, workers: Sequence[WorkerView], now: float) -> WorkerView:
        ordered = sorted(workers, key=lambda w: w.id)
        after = [w for w in ordered if self._last is None or w.id > self._last]
        return after[0] if after else ordered[0]

    def on_dispatch(self, job: Job, worker: WorkerView, now: float) -> None:
        self._last = worker.id

    def snapshot(self) -> dict[str, Any]:
        return super().snapshot() | {"last": self._last}

    def restore(self, snapshot: dict[str, Any]) -> None:
        self._last = snapshot.get("last")
