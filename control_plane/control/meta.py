"""The meta-controller: picks the ordering policy every period, with guards (H-MAS §4.4).

It runs inside the scheduler core on both clocks (the core calls `on_arrival`, `on_finish` and
`step`), does no I/O and switches policies through the core's zero-downtime switch, so the
fairness counters in the ledger survive every switch. Every switch is kept as a `Switch`
record (the live scheduler writes them as audit rows with actor `controller`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from control_plane.control.execution import ExecutionControl, ExecutionParams
from control_plane.control.llm_selector import LlmParams, LlmSelector
from control_plane.control.selectors import RulesSelector, Selector, build_selector
from control_plane.control.views import LongView, ViewKeeper
from control_plane.core.job import Job, Outcome
from control_plane.core.limits import ExecutionLimits
from control_plane.core.policy import Policy

if TYPE_CHECKING:
    from control_plane.core.scheduler_core import SchedulerCore

DEFAULT_POOL = ("fcfs", "edf", "sjf", "two_lane", "wfq", "vtc", "hmfs", "exfairs")
NEVER_AGAIN = 1_000_000_000
"""The periods a policy that could not be built stays out of the pool: this controller's life."""
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Switch:
    """One automatic policy change: when, from what to what, why, and the view it saw."""

    t: float
    old: str
    new: str
    reason: str
    selector: str
    view: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "from": self.old,
            "to": self.new,
            "reason": self.reason,
            "selector": self.selector,
            "view": self.view,
        }


@dataclass
class Guards:
    """Emergency bypass and rollback thresholds (H-MAS §4.4)."""

    bypass_violations: float = 0.9
    """Short-window violation rate that, with a growing queue, forces `fcfs`."""
    bypass_clear: float = 0.5
    """The bypass ends when the short-window violation rate falls below this, or after one
    period: a sustained overload is the selector's to handle, not a reason to stay in fcfs."""
    rollback_ratio: float = 1.5
    """ρ: a switch is undone when, one period later, p99 TTFT or the violation rate is more
    than ρ times what it was before the switch..."""
    rollback_load_band: float = 0.25
    """...and the arrival rate is within this fraction of the pre-switch period's (under a
    changed load the comparison says nothing about the policy)."""
    rollback_floor: float = 0.05
    """Violation rates below this are not compared (noise)."""
    rollback_ttft_floor_s: float = 0.1
    """p99 TTFTs below this are not compared: in a lightly loaded pool 15 ms against 26 ms is
    noise, not a policy that made things worse."""
    enabled: bool = True
    """False: neither guard acts (an ablation)."""


@dataclass
class _Trial:
    previous: str
    ttft_p99_s: float | None
    violation_rate: float
    arrival_rps: float


@dataclass
class MetaController:
    """Every `period_s`, asks `selector` for a policy of `pool` given `V_long` and switches to
    it; guards as `Guards` documents. Guarantees: at most one switch per period outside the
    bypass; the bypass only switches to `fcfs` and back; a rolled-back policy is not chosen
    again for `cooldown_periods` periods; every switch is recorded in `switches` (the newest
    `max_records`)."""

    selector: Selector
    build: Callable[[str], Policy]
    """Builds a registry policy over the core's context (injected: the core knows no registry)."""
    pool: Sequence[str] = DEFAULT_POOL
    period_s: float = 30.0
    guards: Guards = field(default_factory=Guards)
    cooldown_periods: int = 2
    max_records: int = 1000
    views: ViewKeeper | None = None
    current: str = "fcfs"
    params: dict[str, Any] = field(default_factory=dict)
    """The `auto` params it was built from (the live knob's value)."""
    execution: ExecutionControl | None = None
    """The execution loop (per-worker prefill cap, dual loop); None = limits untouched."""
    switches: list[Switch] = field(default_factory=list)
    last_view: LongView | None = None
    _next_at: float | None = None
    _trial: _Trial | None = None
    _bypass_from: str | None = None
    _bypass_until: float = 0.0
    _bypass_quiet_until: float = 0.0
    _banned: dict[str, int] = field(default_factory=dict)
    _unsent: list[Switch] = field(default_factory=list)

    # -- inputs (from the core) ----------------------------------------------------------------
    def attach(self, core: SchedulerCore) -> None:
        """Start watching `core`, whose policy is the current one."""
        self.views = self.views or ViewKeeper(core.ctx.latency, long_s=self.period_s)
        self.current = core.dispatcher.policy.name
        # a controller without the loop lifts whatever limits a previous one left
        core.dispatcher.limits = (
            self.execution.limits if self.execution is not None else ExecutionLimits()
        )

    def on_arrival(self, job: Job, now: float) -> None:
        if self.views is not None:
            self.views.on_arrival(job, now)

    def on_finish(self, job: Job, outcome: Outcome, now: float) -> None:
        if self.views is not None:
            self.views.on_finish(job, outcome, now)

    # -- the loop ----------------------------------------------------------------------------
    def step(self, core: SchedulerCore, now: float) -> Switch | None:
        """Called every scheduling cycle; switches `core`'s policy when a decision says so."""
        if self.views is None:
            self.attach(core)
        assert self.views is not None
        queued, inflight = len(core.pending), len(core.running)
        self.views.note_queue(now, queued)
        if self.execution is not None:
            self._execute(core, now, queued, inflight)
        late = self.selector.late(now)  # resolved during a bypass: dropped
        if self.guards.enabled:
            bypass = self._bypass(core, now, queued, inflight)
            if bypass is not None or self._bypass_from is not None:
                return bypass
        if late is not None and self._may_take(late.policy):
            view = self.last_view
            assert view is not None
            self._trial = _Trial(
                self.current, view.ttft_p99_s, view.violation_rate, view.arrival_rps
            )
            return self._switch(core, late.policy, late.reason, view, now)
        if self._next_at is None:
            self._next_at = now + self.period_s
        if now < self._next_at:
            return None
        self._next_at = now + self.period_s
        view = self.views.long(now, queued)
        self.last_view = view
        self.selector.reward(view)
        rolled = self._rollback(core, view, now) if self.guards.enabled else None
        if rolled is not None:
            return rolled
        self._banned = {p: n - 1 for p, n in self._banned.items() if n > 1}
        pool = [p for p in self.pool if p not in self._banned]
        choice = self.selector.choose(view, self.current, pool)
        if choice.policy == self.current:
            return None
        self._trial = _Trial(self.current, view.ttft_p99_s, view.violation_rate, view.arrival_rps)
        return self._switch(core, choice.policy, choice.reason, view, now)

    def _may_take(self, policy: str) -> bool:
        """A late choice is taken when it changes the policy to one of the pool not barred."""
        ok = policy != self.current and policy in self.pool and policy not in self._banned
        return ok and self.last_view is not None

    def _execute(self, core: SchedulerCore, now: float, queued: int, inflight: int) -> None:
        assert self.views is not None and self.execution is not None
        views = self.views
        if self.execution.step(
            now,
            lambda: views.short(now, queued, inflight),
            lambda: [slot.view() for slot in core.workers.values()],
        ):
            core.dispatcher.limits = self.execution.limits

    def _bypass(self, core: SchedulerCore, now: float, queued: int, inflight: int) -> Switch | None:
        assert self.views is not None
        short = self.views.short(now, queued, inflight)
        g = self.guards
        if self._bypass_from is None:
            if now < self._bypass_quiet_until or self.current == "fcfs":
                return None
            growing = self.views.queue_growth(now, queued) > 0
            if short.completions and short.violation_rate >= g.bypass_violations and growing:
                self._bypass_from, self._trial = self.current, None
                self._bypass_until = now + self.period_s
                view = self.views.long(now, queued)
                return self._switch(core, "fcfs", "emergency bypass", view, now)
            return None
        # no end in the window is no evidence of recovery (the rate of nothing reads 0)
        cleared = short.completions > 0 and short.violation_rate < g.bypass_clear
        if cleared or now >= self._bypass_until:
            back, self._bypass_from = self._bypass_from, None
            self._next_at = now + self.period_s
            # the selector decides at the next period and its choice gets a period to show
            self._bypass_quiet_until = now + 2.0 * self.period_s
            view = self.views.long(now, queued)
            why = "bypass cleared" if cleared else "bypass ended after one period"
            return self._switch(core, back, why, view, now)
        return None

    def _rollback(self, core: SchedulerCore, view: LongView, now: float) -> Switch | None:
        trial, self._trial = self._trial, None
        if trial is None:
            return None
        band = self.guards.rollback_load_band
        if abs(view.arrival_rps - trial.arrival_rps) > band * max(trial.arrival_rps, 1e-9):
            return None
        rho = self.guards.rollback_ratio
        worse_ttft = (
            trial.ttft_p99_s is not None
            and view.ttft_p99_s is not None
            and view.ttft_p99_s > rho * max(trial.ttft_p99_s, self.guards.rollback_ttft_floor_s)
        )
        floor = self.guards.rollback_floor
        worse_viol = view.violation_rate > floor and view.violation_rate > rho * max(
            trial.violation_rate, floor
        )
        if not (worse_ttft or worse_viol):
            return None
        self._banned[self.current] = self.cooldown_periods + 1
        why = "p99 TTFT" if worse_ttft else "violation rate"
        return self._switch(core, trial.previous, f"rollback: {why} > {rho}x", view, now)

    def _switch(
        self, core: SchedulerCore, policy: str, reason: str, view: LongView, now: float
    ) -> Switch | None:
        try:
            built = self.build(policy)
        except Exception:  # a plug-in's own code raised: no reason to stop scheduling
            log.exception("policy %r cannot be built; %r kept", policy, self.current)
            self._banned[policy] = NEVER_AGAIN
            self._trial = None
            return None
        record = Switch(now, self.current, policy, reason, self.selector.name, view.to_json())
        core.switch_policy(built, now)
        self.current = policy
        self.switches.append(record)
        del self.switches[: -self.max_records]
        self._unsent.append(record)
        del self._unsent[: -self.max_records]
        return record

    def take_unsent(self) -> list[Switch]:
        """The switches not yet handed out (the live scheduler publishes them as audit rows)."""
        out, self._unsent = self._unsent, []
        return out

    def put_back(self, switches: list[Switch]) -> None:
        """Switches that could not be published: handed out again next time."""
        self._unsent[:0] = switches

    def snapshot(self) -> dict[str, Any]:
        return {
            "current": self.current,
            "selector": self.selector.snapshot(),
            "banned": dict(self._banned),
            "bypass_from": self._bypass_from,
            "bypass_until": self._bypass_until,
            "execution": self.execution.snapshot() if self.execution is not None else None,
        }

    def restore(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        self.selector.restore(data.get("selector"))
        banned = data.get("banned")
        if isinstance(banned, dict):
            self._banned = {str(k): int(v) for k, v in banned.items() if isinstance(v, int)}
        bypass = data.get("bypass_from")
        self._bypass_from = bypass if isinstance(bypass, str) else None
        until = data.get("bypass_until")
        self._bypass_until = float(until) if isinstance(until, int | float) else 0.0
        if self.execution is not None:
            self.execution.restore(data.get("execution"))


class AutoParams(BaseModel):
    """Params of the `auto` policy: the controller's, not a registry policy's."""

    model_config = ConfigDict(extra="forbid")

    selector: Literal["rules", "bandit", "llm"] = "rules"
    pool: list[str] = Field(default_factory=lambda: list(DEFAULT_POOL), min_length=1)
    initial: str = "fcfs"
    """The policy the controller starts from (vLLM's default order)."""
    period_s: float = Field(30.0, gt=0)
    seed: int = 0
    bypass_violations: float = Field(0.9, gt=0, le=1)
    rollback_ratio: float = Field(1.5, gt=1)
    guards: bool = True
    """False turns off the emergency bypass and the rollback (an ablation)."""
    llm: LlmParams | None = None
    """The `llm` selector's model (required with `selector: llm`)."""
    execution: ExecutionParams = Field(default_factory=ExecutionParams)
    """The execution loop; `{"enabled": false}` leaves dispatch limits alone (an ablation)."""

    @model_validator(mode="after")
    def _initial_in_pool(self) -> AutoParams:
        if self.initial not in self.pool:
            raise ValueError(f"initial: {self.initial!r} is not in the pool")
        if self.selector == "llm" and self.llm is None:
            raise ValueError("llm: the llm selector needs its model (llm.model)")
        if self.llm is not None and self.llm.timeout_s >= self.period_s:
            raise ValueError("llm.timeout_s: must be shorter than period_s")
        return self


AUTO = "auto"
"""The policy name that hands the choice to the controller."""


def build_controller(
    params: dict[str, Any] | None, build: Callable[[str], Policy]
) -> MetaController:
    """A controller from `auto` params; `build` makes registry policies over the core's context."""
    p = AutoParams.model_validate(params or {})
    selector: Selector = (
        LlmSelector(p.llm, p.period_s, RulesSelector(home=p.initial))
        if p.selector == "llm" and p.llm is not None
        else build_selector(p.selector, p.seed)
    )
    if isinstance(selector, RulesSelector):
        selector.home = p.initial
    return MetaController(
        selector=selector,
        build=build,
        pool=tuple(p.pool),
        period_s=p.period_s,
        guards=Guards(
            bypass_violations=p.bypass_violations,
            rollback_ratio=p.rollback_ratio,
            enabled=p.guards,
        ),
        current=p.initial,
        params=dict(params or {}),
        execution=ExecutionControl(p.execution) if p.execution.enabled else None,
    )
