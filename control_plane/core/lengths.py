"""Output-length prediction from history: what the scheduler may know of a request's length.

A live scheduler never knows how long an answer will be; it sees the prompt, the client's
`max_tokens` cap, the request's tags and the lengths of answers that already ended. This module
turns the last into a prediction (`Job.predicted_out`) that every policy, admission and
placement reads through `Job.expected_out`, in the simulator as live.
"""

from __future__ import annotations

import contextlib
import math
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sortedcontainers import SortedList

from control_plane.core.job import Job, Outcome

Key = tuple[str, ...]


@dataclass(slots=True)
class _Window:
    """The last `size` observed lengths of one key, in arrival order and sorted."""

    size: int
    order: deque[int] = field(default_factory=deque)
    ranked: SortedList = field(default_factory=SortedList)
    read: tuple[float, int] | None = None
    """The last quantile read and its value, until the next `add`."""

    def add(self, n: int) -> None:
        self.order.append(n)
        self.ranked.add(n)
        if len(self.order) > self.size:
            self.ranked.remove(self.order.popleft())
        self.read = None

    def quantile(self, q: float) -> int:
        read = self.read
        if read is not None and read[0] == q:
            return read[1]
        ranked = self.ranked
        value = int(ranked[min(len(ranked) - 1, max(0, math.ceil(q * len(ranked)) - 1))])
        self.read = (q, value)
        return value


@dataclass(slots=True)
class PredictionError:
    """Running error of the predictions whose answers ended `ok`."""

    n: int = 0
    abs_sum: float = 0.0
    under: int = 0
    """Answers longer than their prediction."""

    @property
    def mae(self) -> float | None:
        return self.abs_sum / self.n if self.n else None

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "mae": self.mae, "under_rate": self.under / self.n if self.n else None}


class LengthPredictor:
    """Predicts a job's output length from the lengths its peers produced, shrunk toward the
    broader groups while a group has few answers.

    Rule: the groups are, from the broadest, the model's pool, `(task)`, `(tenant, app)`,
    `(tenant, app, agent)` and `(tenant, app, agent, task)`, each keeping the last `window`
    answers served in full. The estimate starts at the job's `max_tokens` (the only bound the
    client gave) and each group with `n` answers whose `quantile` (the median by default) is
    `q` moves it to `(n · q + prior_weight · estimate) / (n + prior_weight)`: a group with no
    answers leaves it, one with many all but replaces it. So a cold start predicts the cap
    (conservative for admission and placement), a new agent its application's lengths, and a
    well-known agent its own.
    Guarantees: the prediction lies in `[1, max_tokens]`; it uses only answers that already
    ended (never the job's own length); memory is at most `max_keys` groups of `window`
    lengths (the groups least recently answered are forgotten first: clients name their own
    tasks and agents); a snapshot keeps the last `snapshot_tail` lengths of each group.
    """

    def __init__(
        self,
        quantile: float = 0.5,
        window: int = 256,
        prior_weight: int = 20,
        max_keys: int = 1024,
        snapshot_tail: int = 64,
    ) -> None:
        if not 0.0 < quantile <= 1.0:
            raise ValueError("quantile must be in (0, 1]")
        if window < 1 or prior_weight < 0:
            raise ValueError("window must be >= 1 and prior_weight >= 0")
        self.quantile = quantile
        self.window = window
        self.prior_weight = prior_weight
        self.max_keys = max_keys
        self.snapshot_tail = snapshot_tail
        self._windows: OrderedDict[Key, _Window] = OrderedDict()
        self.error = PredictionError()

    def predict(self, job: Job) -> int:
        """The predicted output length of `job` (see the class docstring)."""
        cap = max(1, job.max_tokens)
        estimate, m = float(cap), self.prior_weight
        for key in reversed(list(_keys(job))):
            found = self._windows.get(key)
            if found is None:
                continue
            n = len(found.order)
            estimate = (n * found.quantile(self.quantile) + m * estimate) / (n + m)
        return max(1, min(cap, round(estimate)))

    def label(self, job: Job) -> None:
        """Set `job.predicted_out` unless something upstream (the gateway) already did."""
        if job.predicted_out is None:
            job.predicted_out = self.predict(job)

    def observe(self, job: Job, outcome: Outcome) -> None:
        """A job ended: learn from its length when it was served in full."""
        if outcome.status != "ok" or outcome.n_out < 1:
            return
        if job.predicted_out is not None:
            miss = outcome.n_out - job.predicted_out
            self.error.n += 1
            self.error.abs_sum += abs(miss)
            self.error.under += miss > 0
        for key in _keys(job):
            window = self._windows.get(key)
            if window is None:
                window = self._windows[key] = _Window(self.window)
            else:
                self._windows.move_to_end(key)
            window.add(outcome.n_out)
        while len(self._windows) > self.max_keys:
            self._windows.popitem(last=False)

    def snapshot(self) -> dict[str, Any]:
        """The windows as JSON (a new leader predicts as the old one did)."""
        return {
            "windows": [
                [list(k), list(w.order)[-self.snapshot_tail :]] for k, w in self._windows.items()
            ],
            "error": [self.error.n, self.error.abs_sum, self.error.under],
        }

    def restore(self, data: Any) -> None:
        """Reload `snapshot()`; anything malformed is skipped (a cold start for that key)."""
        if not isinstance(data, dict):
            return
        for item in data.get("windows") or []:
            if not (isinstance(item, list) and len(item) == 2):
                continue
            key, lengths = item
            if not isinstance(key, list) or not isinstance(lengths, list):
                continue
            window = _Window(self.window)
            for n in lengths[-self.window :]:
                if isinstance(n, int) and n >= 1:
                    window.add(n)
            if window.order:
                self._windows[tuple(str(k) for k in key)] = window
        error = data.get("error")
        if isinstance(error, list) and len(error) == 3:
            with contextlib.suppress(TypeError, ValueError, OverflowError):  # malformed: afresh
                self.error = PredictionError(int(error[0]), float(error[1]), int(error[2]))


def _keys(job: Job) -> Iterator[Key]:
    """The peer groups of `job`, most specific first."""
    model = job.model
    if job.task:
        yield ("agent", model, job.tenant, job.app, job.agent, job.task)
    yield ("agent", model, job.tenant, job.app, job.agent)
    yield ("app", model, job.tenant, job.app)
    if job.task:
        yield ("task", model, job.task)
    yield ("pool", model)
