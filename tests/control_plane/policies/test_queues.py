"""The job queue: its head, removals and per-model scans match a plain sorted list, whether
one model queues or several (the per-model lists are built when a second model arrives),
and whether it is held in a plain list or, longer, in a `SortedList`."""

from __future__ import annotations

import random

import pytest

from control_plane.policies import queues
from control_plane.policies.queues import JobQueue
from tests.control_plane.policies.jobs import job


@pytest.mark.parametrize("seed", range(6))
def test_head_removals_and_scans_match_a_sorted_list(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queues, "SMALL", 16)  # the queue changes form back and forth
    rng = random.Random(seed)
    queue = JobQueue(key=lambda j: (float(j.tier),))
    plain: dict[str, tuple[tuple[float], float, int, str, str]] = {}  # id → (entry, model)
    models = ["llm"] if seed % 3 == 0 else ["llm", "vlm", "image"]
    forms = []
    for i in range(1500):
        op = rng.random() * 0.6 if i < 700 else 0.4 + rng.random() * 0.6  # grows, drains
        if op < 0.4 or not plain:
            new = job(
                f"j{i}", arrival=rng.random(), tier=rng.randrange(3), model=rng.choice(models)
            )
            queue.add(new)
            plain[new.id] = ((float(new.tier),), new.arrival, new.seq, new.id, new.model)
        elif op < 0.7:
            head = queue.pop_head()
            assert head.id == min(plain.values())[3]
            del plain[head.id]
        elif op < 0.85:
            gone = rng.choice(sorted(plain))
            taken = queue.remove(gone)
            assert taken is not None and taken.id == gone
            del plain[gone]
        else:
            refused = {m for m in models if rng.random() < 0.4}
            scan = [j.id for _, j in queue.candidates(refused.__contains__)]
            assert scan == [e[3] for e in sorted(plain.values()) if e[4] not in refused]
        ordered = sorted(plain.values())
        first = queue.head()
        assert (first.id if first else None) == (ordered[0][3] if ordered else None)
        assert queue.head_entry() == (ordered[0][:4] if ordered else None)
        assert len(queue) == len(plain)
        if not forms or forms[-1] != type(queue._entries).__name__:
            forms.append(type(queue._entries).__name__)
    assert forms[:3] == ["list", "SortedList", "list"]
