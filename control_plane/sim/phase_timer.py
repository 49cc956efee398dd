"""Where a simulation's CPU goes: exclusive CPU time per phase of the event loop.

`arbiter sim speed --split` attaches a `PhaseTimer` to a `Simulator` before it runs. The timer
wraps, on that one simulator (its instance, its core and its engines; no class is patched),
the calls that make up the loop: the engines' steps, the simulator's side of arrivals,
progress reports, dispatches, completions and ticks, and the scheduler core's side of each.

Rule: a phase is charged its calls' *exclusive* CPU time (`time.process_time`), i.e. minus the
time of the wrapped calls nested inside them, so the phases never overlap and, with
`loop and the rest` (the run's CPU minus every phase), add up to the run's CPU time. The
wrappers themselves cost about 1.2 µs per call on the 2-core box (two clock reads), which
lands in the phases they wrap: about 1.5 % of a `kairos-fair` run, 12 wrapped calls per
request (docs/performance.md, "Where a simulated request's CPU goes").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from control_plane.sim.engine_loop import Simulator

ENGINE = "engine steps"
REST = "loop and the rest"
PHASES = (
    ENGINE,
    "progress: simulator",
    "progress: core charges",
    "dispatch: simulator",
    "dispatch: core decisions",
    "arrivals: simulator",
    "arrivals: core",
    "completions: simulator",
    "completions: core",
    "ticks",
    REST,
)
"""Every phase, in the order a report lists them."""


class PhaseTimer:
    """Exclusive CPU seconds per phase of one simulator's run (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.process_time) -> None:
        self._clock = clock
        self.cpu_s: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._children: list[float] = [0.0]
        """Per open wrapped call (and a root), the CPU time of the wrapped calls inside it."""

    def attach(self, sim: Simulator) -> None:
        """Wrap `sim`'s loop calls; call before `sim.run()`."""
        core = sim.core
        for owner, name, phase in (
            (sim, "_flush", "progress: simulator"),
            (core, "progress_batch", "progress: core charges"),
            (sim, "_dispatch", "dispatch: simulator"),
            (core, "decide", "dispatch: core decisions"),
            (sim, "_arrive", "arrivals: simulator"),
            (core, "arrive", "arrivals: core"),
            (sim, "_complete", "completions: simulator"),
            (core, "complete", "completions: core"),
            (sim, "_tick", "ticks"),
        ):
            self.wrap(owner, name, phase)
        for worker in sim.workers:
            self.wrap(worker.engine, "advance", ENGINE)
            self.wrap(worker.engine, "add", ENGINE)

    def wrap(self, owner: object, name: str, phase: str) -> None:
        """Charge `owner.name`'s calls to `phase` (exclusive of wrapped calls inside them)."""
        call: Callable[..., Any] = getattr(owner, name)
        clock, children, cpu_s = self._clock, self._children, self.cpu_s

        def timed(*args: Any, **kwargs: Any) -> Any:
            children.append(0.0)
            start = clock()
            try:
                return call(*args, **kwargs)
            finally:
                elapsed = clock() - start
                cpu_s[phase] += elapsed - children.pop()
                children[-1] += elapsed

        setattr(owner, name, timed)

    def finish(self, total_cpu_s: float) -> dict[str, float]:
        """Every phase's CPU seconds, `loop and the rest` set from the run's total."""
        self.cpu_s[REST] = 0.0
        self.cpu_s[REST] = max(total_cpu_s - sum(self.cpu_s.values()), 0.0)
        return dict(self.cpu_s)
