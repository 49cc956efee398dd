"""The meta-controller on a real scheduler core: periodic choice, guards, audit records."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from control_plane.admission.registry import build_admission
from control_plane.control.meta import AutoParams, MetaController, build_controller
from control_plane.control.selectors import Choice
from control_plane.control.views import LongView
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.job import Outcome, Slo
from control_plane.core.policy import Policy, PolicyContext
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.jobs import job

SLO = Slo(ttft_s=1.0)


@dataclass
class Scripted:
    """A selector that answers from a script (the rules are tested on their own)."""

    answers: list[str]
    name: str = "scripted"
    seen: list[LongView] = field(default_factory=list)

    def choose(self, view: LongView, current: str, pool: list[str]) -> Choice:
        self.seen.append(view)
        answer = self.answers.pop(0) if self.answers else current
        return Choice(answer if answer in pool else current, "script")

    def reward(self, view: LongView) -> None: ...

    def late(self, now: float) -> Choice | None:
        return None

    def snapshot(self) -> None:
        return None

    def restore(self, data: object) -> None: ...


def unset(name: str) -> Policy:
    raise AssertionError("core_with installs the real builder")


def scripted(*answers: str) -> MetaController:
    return MetaController(selector=Scripted(list(answers)), build=unset, period_s=10.0)


def core_with(controller: MetaController) -> SchedulerCore:
    ctx = PolicyContext()
    controller.build = lambda name: build_policy(name, ctx)
    dispatcher = Dispatcher(
        build_policy("fcfs", ctx),
        build_admission("capacity", None),
        build_placement("least_loaded"),
    )
    return SchedulerCore(dispatcher, controller=controller)


def end(core: SchedulerCore, k: int, now: float, violated: bool) -> None:
    assert core.controller is not None
    ttft = 5.0 if violated else 0.1
    core.controller.on_finish(job(f"done{k}", slo=SLO), Outcome("ok", 10, 10, ttft_s=ttft), now)


def test_a_period_s_choice_switches_the_policy_and_keeps_the_queue() -> None:
    ctl = MetaController(
        selector=Scripted(["sjf", "sjf", "edf"]), build=lambda n: None, period_s=10.0
    )  # type: ignore[arg-type,return-value]
    core = core_with(ctl)
    for k in range(5):
        core.arrive(job(f"q{k}", arrival=float(k)), None, float(k))
    ledger = core.ctx.ledger
    core.tick(0.0)
    core.tick(9.9)
    assert core.dispatcher.policy.name == "fcfs" and not ctl.switches
    core.tick(10.0)
    assert core.dispatcher.policy.name == "sjf"
    assert {j.id for j in core.dispatcher.policy.jobs()} == {f"q{k}" for k in range(5)}
    assert core.ctx.ledger is ledger  # fairness counters live on across switches
    core.tick(20.0)  # the same answer: no switch
    core.tick(30.0)
    assert [(s.old, s.new) for s in ctl.switches] == [("fcfs", "sjf"), ("sjf", "edf")]
    record = ctl.switches[0].to_json()
    assert record["selector"] == "scripted" and record["view"]["queued"] == 5


def test_rollback_restores_the_previous_policy_when_the_switch_made_it_worse() -> None:
    ctl = scripted("sjf", "sjf")
    core = core_with(ctl)
    core.tick(0.0)
    for k in range(10):  # before the switch: 1 in 10 misses, one arrival a second
        core.arrive(job(f"a{k}", slo=SLO), None, float(k))
        end(core, k, float(k) + 0.5, violated=k == 0)
    core.tick(10.0)
    assert core.dispatcher.policy.name == "sjf"
    for k in range(10, 20):  # after: half miss, at the same load
        core.arrive(job(f"a{k}", slo=SLO), None, float(k))
        end(core, k, float(k) + 0.5, violated=k % 2 == 0)
    core.tick(20.0)
    assert core.dispatcher.policy.name == "fcfs"
    assert ctl.switches[-1].reason.startswith("rollback")
    core.tick(30.0)  # sjf is cooling down: the script's sjf is not available
    assert core.dispatcher.policy.name == "fcfs"


def finish_without_slo(core: SchedulerCore, k: int, now: float, ttft_s: float) -> None:
    assert core.controller is not None
    core.controller.on_finish(job(f"done{k}"), Outcome("ok", 10, 10, ttft_s=ttft_s), now)


@pytest.mark.parametrize(
    ("before_s", "after_s", "rolled"), [(0.015, 0.026, False), (0.2, 0.4, True)]
)
def test_rollback_compares_p99_ttft_from_a_floor(
    before_s: float, after_s: float, rolled: bool
) -> None:
    """15 ms against 26 ms is noise of a lightly loaded pool; 200 against 400 ms is worse."""
    ctl = scripted("sjf")
    core = core_with(ctl)
    core.tick(0.0)
    for k in range(10):
        core.arrive(job(f"a{k}"), None, float(k))
        finish_without_slo(core, k, float(k) + 0.5, before_s)
    core.tick(10.0)
    assert core.dispatcher.policy.name == "sjf"
    for k in range(10, 20):
        core.arrive(job(f"a{k}"), None, float(k))
        finish_without_slo(core, k, float(k) + 0.5, after_s)
    core.tick(20.0)
    assert (core.dispatcher.policy.name == "fcfs") is rolled
    assert ctl.switches[-1].reason.startswith("rollback") is rolled


def in_bypass() -> tuple[MetaController, SchedulerCore]:
    """sjf, then 20 arrivals that all end violating while the queue grows: bypass at 3 s."""
    ctl = build_controller({"initial": "sjf", "period_s": 10.0}, unset)
    core = core_with(ctl)
    core.switch_policy(build_policy("sjf", core.ctx), 0.0)
    ctl.current = "sjf"
    core.tick(0.0)
    for k in range(20):  # the queue grows and everything ending misses
        core.arrive(job(f"b{k}", slo=SLO), None, 1.0 + 0.1 * k)
        end(core, k, 1.0 + 0.1 * k, violated=True)
    core.tick(3.0)
    return ctl, core


def test_the_emergency_bypass_runs_fcfs_for_at_most_one_period() -> None:
    ctl, core = in_bypass()
    assert core.dispatcher.policy.name == "fcfs" and ctl.switches[-1].reason == "emergency bypass"
    for k in range(20, 40):
        core.arrive(job(f"b{k}", slo=SLO), None, 3.0 + 0.5 * k)
        end(core, k, 3.0 + 0.5 * (k - 20), violated=True)
    core.tick(13.0)
    assert ctl.switches[-1].reason == "bypass ended after one period"
    assert core.dispatcher.policy.name == "sjf"


def test_the_bypass_does_not_clear_while_nothing_ends() -> None:
    """An empty window is no evidence of recovery: with the queue still growing and nothing
    ending, fcfs stays until the period is over. Before, the rate of no ends (0) read as
    cleared and the old policy came back 5 s into the overload."""
    ctl, core = in_bypass()
    assert ctl.switches[-1].reason == "emergency bypass"
    for k in range(20, 30):  # arrivals keep coming, nothing ends
        core.arrive(job(f"b{k}", slo=SLO), None, 3.0 + 0.5 * (k - 20))
        core.tick(3.0 + 0.5 * (k - 20))
    core.tick(9.0)  # 6 s after the bypass: the short window holds no end
    assert core.dispatcher.policy.name == "fcfs" and len(ctl.switches) == 1
    core.tick(13.0)
    assert ctl.switches[-1].reason == "bypass ended after one period"


def test_guards_off_means_no_bypass_and_params_are_validated() -> None:
    ctl = build_controller({"guards": False, "period_s": 100.0}, unset)
    core = core_with(ctl)
    core.switch_policy(build_policy("sjf", core.ctx), 0.0)
    ctl.current = "sjf"
    core.tick(0.0)
    for k in range(20):
        core.arrive(job(f"c{k}", slo=SLO), None, 1.0 + 0.1 * k)
        end(core, k, 1.0 + 0.1 * k, violated=True)
    core.tick(3.0)
    assert core.dispatcher.policy.name == "sjf" and not ctl.switches
    with pytest.raises(ValueError, match="selector"):
        AutoParams.model_validate({"selector": "oracle"})


@dataclass
class Broken:
    name: str = "broken"

    def choose(self, view: LongView, current: str, pool: list[str]) -> Choice:
        raise RuntimeError("a selector bug")

    def reward(self, view: LongView) -> None: ...

    def late(self, now: float) -> Choice | None:
        return None

    def snapshot(self) -> None:
        return None

    def restore(self, data: object) -> None: ...


def test_a_failing_controller_is_detached_and_scheduling_goes_on() -> None:
    ctl = MetaController(selector=Broken(), build=unset, period_s=1.0)
    core = core_with(ctl)
    core.arrive(job("q0", slo=SLO), None, 0.0)
    core.tick(0.0)
    core.tick(1.0)  # the selector raises inside the core
    assert core.controller is None and "a selector bug" in (core.controller_error or "")
    assert core.dispatcher.policy.name == "fcfs" and "q0" in core.pending
    core.tick(2.0)  # nothing left to fail


def test_a_queue_timeout_is_an_end_the_views_count() -> None:
    ctl = scripted()
    core = core_with(ctl)
    core.tick(0.0)
    core.arrive(job("late", slo=SLO), None, 1.0)
    assert core.time_out("late", 5.0) is not None and "late" not in core.pending
    assert ctl.views is not None
    assert ctl.views.short(5.0, 0, 0).violation_rate == 1.0
    assert core.time_out("late", 6.0) is None


def test_initial_must_be_in_the_pool() -> None:
    with pytest.raises(ValueError, match="not in the pool"):
        AutoParams.model_validate({"pool": ["edf"], "initial": "fcfs"})


def test_a_policy_that_cannot_be_built_is_left_out_and_scheduling_goes_on() -> None:
    """A pool's plug-in whose own code raised when built went up through the core's tick and
    ended the leader's tick loop at each choice of it: now the controller keeps its policy,
    leaves that one out for good and chooses again at the next period."""
    ctl = scripted("broken", "sjf")
    ctl.pool = ("fcfs", "broken", "sjf")
    core = core_with(ctl)
    real = ctl.build

    def build(name: str) -> Policy:
        if name == "broken":
            raise RuntimeError("this plug-in cannot start here")
        return real(name)

    ctl.build = build
    core.tick(0.0)
    core.tick(10.0)  # the script's "broken"
    assert core.dispatcher.policy.name == "fcfs" and not ctl.switches
    core.tick(20.0)
    assert core.dispatcher.policy.name == "sjf"
    assert [(s.old, s.new) for s in ctl.switches] == [("fcfs", "sjf")]
    assert "broken" in ctl.snapshot()["banned"]
