"""`PhaseTimer`: exclusive CPU per phase of the simulator's loop (`arbiter sim speed --split`)."""

from __future__ import annotations

import math

import pytest

from control_plane.sim.engine_loop import Simulator
from control_plane.sim.phase_timer import ENGINE, PHASES, REST, PhaseTimer
from control_plane.sim.runner import run_policy
from control_plane.sim.setup import PolicySpec
from tests.control_plane.sim.builders import tiny


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Nested:
    """`outer` spends 1 + 0.5 s of its own around `inner`'s 2 s; `fail` spends 4 s, raises."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock

    def outer(self) -> None:
        self.clock.now += 1.0
        self.inner()
        self.clock.now += 0.5

    def inner(self) -> None:
        self.clock.now += 2.0

    def fail(self) -> None:
        self.clock.now += 4.0
        raise RuntimeError("boom")


def test_a_phase_is_charged_its_own_time_only_and_the_rest_closes_the_total() -> None:
    clock = _Clock()
    toy = _Nested(clock)
    timer = PhaseTimer(clock)
    timer.wrap(toy, "outer", "dispatch: simulator")
    timer.wrap(toy, "inner", "dispatch: core decisions")
    timer.wrap(toy, "fail", ENGINE)
    toy.outer()
    toy.inner()
    with pytest.raises(RuntimeError, match="boom"):
        toy.fail()
    toy.outer()  # the failed call left no open frame behind
    phases = timer.finish(20.0)
    assert phases["dispatch: simulator"] == 3.0
    assert phases["dispatch: core decisions"] == 6.0
    assert phases[ENGINE] == 4.0
    assert phases[REST] == 7.0
    assert list(phases) == list(PHASES) and sum(phases.values()) == 20.0


def test_a_timed_run_decides_exactly_as_an_untimed_one_and_its_phases_add_up() -> None:
    scenario = tiny(duration_s=10, drain_s=30)
    policy = PolicySpec("vtc", "vtc")
    plain = run_policy(scenario, policy)
    timer = PhaseTimer()
    attached: list[Simulator] = []

    def attach(sim: Simulator) -> None:
        attached.append(sim)
        timer.attach(sim)

    timed = run_policy(scenario, policy, instrument=attach)
    assert len(attached) == 1
    assert timed.results == plain.results
    assert [(r.id, r.status, r.n_out, r.dispatched, r.finished) for r in timed.records] == [
        (r.id, r.status, r.n_out, r.dispatched, r.finished) for r in plain.records
    ]
    phases = timer.finish(timed.cpu_s)
    assert math.isclose(sum(phases.values()), timed.cpu_s, rel_tol=1e-9)
    assert all(cpu >= 0.0 for cpu in phases.values())
    for busy in (ENGINE, "progress: core charges", "dispatch: core decisions", "arrivals: core"):
        assert phases[busy] > 0.0, busy
