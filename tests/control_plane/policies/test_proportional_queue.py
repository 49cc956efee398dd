"""The proportional queue's dequeue past refused models: merging the other models' entries
asks `admit` about the same jobs in the same order, and takes the same job, as walking the
whole queue — under inserts anywhere, withdrawals, sweeps, relabelling, and a queue that held
one model before a second one came."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from control_plane.core.job import Job
from control_plane.core.policy import Refuses, StopPop
from control_plane.policies import proportional_queue
from control_plane.policies.proportional_queue import ProportionalQueue
from tests.control_plane.policies.jobs import job


class _WalkAll(ProportionalQueue):
    """The reference: every dequeue walks the whole queue."""

    def _pop_merged(
        self, admit: Callable[[Job], bool], refuses: Refuses, refused: set[str]
    ) -> Job | None:
        return self._pop_first(admit, refuses, refused)


class _Gate:
    """The dispatcher's gate in small: pools with room, a fit per job, a refused job holding
    its pool, `StopPop` once every pool is held. Records whom it was asked about."""

    def __init__(self, room: set[str], models: list[str], rng: random.Random) -> None:
        self.room, self.models, self.held = room, models, set[str]()
        self.fits = rng.random()
        self.asked: list[str] = []

    def refuses(self, model: str) -> bool:
        return model in self.held or model not in self.room

    def __call__(self, job: Job) -> bool:
        self.asked.append(job.id)
        if self.refuses(job.model):
            return False
        if (job.n_in * 7919) % 100 < self.fits * 100:
            return True
        self.held.add(job.model)
        if self.held >= self.room:
            raise StopPop
        return False


def _pop(queue: ProportionalQueue, gate: _Gate) -> str | None:
    try:
        taken = queue.pop_first(gate)
    except StopPop:
        return "stop"
    return None if taken is None else taken.id


@pytest.mark.parametrize("seed", range(8))
def test_merged_dequeue_asks_and_takes_as_the_full_walk(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proportional_queue, "GAP", 4)  # labels run out: relabelling is exercised
    rng = random.Random(seed)
    models = ["llm", "vlm", "image"][: 2 + seed % 2]
    fast = ProportionalQueue(multiplier=2.0, p_max=8, sweep_slack=3)
    slow = _WalkAll(multiplier=2.0, p_max=8, sweep_slack=3)
    queued: list[str] = []
    for i in range(2500):
        op = rng.random()
        if op < 0.5:
            model = rng.choice(models) if i > 300 else models[0]  # one model, then several
            new = job(f"j{i}", model=model, n_in=rng.randrange(1, 1000))
            priority = rng.randrange(-3, 4)
            assert fast.insert(new, priority) == slow.insert(new, priority)
            queued.append(new.id)
        elif op < 0.65 and queued:
            gone = queued.pop(rng.randrange(len(queued)))
            assert fast.remove(gone) is slow.remove(gone)
        else:
            room = {m for m in models if rng.random() < 0.6}
            a, b = _Gate(room, models, random.Random(i)), _Gate(room, models, random.Random(i))
            taken = _pop(fast, a)
            assert taken == _pop(slow, b)
            assert a.asked == b.asked
            if taken in queued:
                queued.remove(taken)
        assert [j.id for j, _ in fast] == [j.id for j, _ in slow]
    assert len(fast) == len(slow) > 0
