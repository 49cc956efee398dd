"""Drive an engine through a list of timed arrivals in virtual time (tests, benchmarks, sims)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from workers.engine.engine import Engine
from workers.engine.step import EngineRequest, StepResult


def replay(engine: Engine, arrivals: Iterable[tuple[float, EngineRequest]]) -> Iterator[StepResult]:
    """Add each request at its time and yield every step, in order, until the engine is idle.

    ``arrivals`` must be sorted by time. At a tie between an arrival and the start of a step,
    the arrival is added first, so it joins that step.
    """
    it = iter(arrivals)
    pending = next(it, None)
    while True:
        t_engine = engine.next_event_time()
        if pending is not None and (t_engine is None or pending[0] <= t_engine):
            engine.add(pending[1], pending[0])
            pending = next(it, None)
            continue
        if t_engine is None:
            return
        yield from engine.advance(t_engine)
