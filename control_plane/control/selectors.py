"""How the meta-controller picks the ordering policy from `V_long` (H-MAS §4.4).

Every selector answers `choose(view, current, pool) -> Choice` and may learn from the reward
of the period that followed its last choice (`reward`). Selectors do no I/O and are
deterministic given their seed, so the simulator and the live scheduler choose alike.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from control_plane.control.views import LongView


@dataclass(frozen=True, slots=True)
class Choice:
    """The policy to run next and why (the rule or arm, for the audit row)."""

    policy: str
    reason: str


class Selector(Protocol):
    name: str

    def choose(self, view: LongView, current: str, pool: Sequence[str]) -> Choice: ...

    def reward(self, view: LongView) -> None: ...

    def late(self, now: float) -> Choice | None:
        """A choice resolved after the period's `choose` (the `llm` selector's answer)."""
        ...

    def snapshot(self) -> Any: ...

    def restore(self, data: Any) -> None: ...


@dataclass
class RulesSelector:
    """The rules of H-MAS §4.4, first match wins (thresholds are knobs):

    1. calm — queue not growing and violation rate below `calm_violations`: keep the policy
       (every order serves everyone; switching would only cost) — except that after
       `calm_periods` calm periods in a row it returns to `home` (the operator's `initial`
       policy: the pressure that moved it away has passed).
    2. unfair — two or more tenants and Jain's index of completions per arrival below
       `jain_floor`: `wfq` (weighted fair share).
    3. mixed lengths — CV of predicted service time above `cv_high`, TTFT misses above
       `ttft_miss_high` and long requests at least `long_fraction` of arrivals: `two_lane`.
    4. deadlines — most completions carry an SLO and the violation rate is above
       `violation_high`: `edf`.
    5. overload — the queue grows: `sjf` (the most completions per unit of capacity).
    6. otherwise keep the policy.
    A rule whose policy is not in the pool is skipped.
    """

    calm_violations: float = 0.05
    jain_floor: float = 0.8
    cv_high: float = 1.0
    ttft_miss_high: float = 0.2
    long_fraction: float = 0.1
    violation_high: float = 0.2
    calm_periods: int = 2
    home: str | None = None
    name: str = "rules"
    _calm: int = field(default=0, repr=False)

    def choose(self, view: LongView, current: str, pool: Sequence[str]) -> Choice:
        growing = view.queue_growth_rps > 0.0
        if not growing and view.violation_rate < self.calm_violations:
            self._calm += 1
            home = self.home
            if home and current != home and home in pool and self._calm >= self.calm_periods:
                return Choice(home, f"calm: back to {home}")
            return Choice(current, "calm")
        self._calm = 0
        rules = (
            (view.tenants >= 2 and view.jain_service < self.jain_floor, "wfq", "unfair"),
            (
                view.t_tot_cv > self.cv_high
                and view.ttft_miss_rate > self.ttft_miss_high
                and view.long_fraction >= self.long_fraction,
                "two_lane",
                "mixed lengths",
            ),
            (
                view.slo_share >= 0.5 and view.violation_rate > self.violation_high,
                "edf",
                "deadlines",
            ),
            (growing, "sjf", "overload"),
        )
        for matched, policy, reason in rules:
            if matched and policy in pool:
                return Choice(policy, reason)
        return Choice(current, "no rule")

    def reward(self, view: LongView) -> None:
        """Rules do not learn."""

    def late(self, now: float) -> Choice | None:
        return None

    def snapshot(self) -> Any:
        return {"calm": self._calm}

    def restore(self, data: Any) -> None:
        calm = data.get("calm") if isinstance(data, dict) else None
        self._calm = calm if isinstance(calm, int) and calm >= 0 else 0


def context_of(view: LongView) -> str:
    """The bandit's context: is the queue growing, are SLOs missed, is service unfair."""
    return "".join(
        (
            "g" if view.queue_growth_rps > 0 else "s",
            "v" if view.violation_rate > 0.2 else "o",
            "u" if view.tenants >= 2 and view.jain_service < 0.8 else "f",
        )
    )


@dataclass
class BanditSelector:
    """Contextual ε-greedy over the pool: per context (`context_of`), the mean reward of each
    policy; it tries every policy of a context once (pool order), then picks the best mean,
    exploring with probability `epsilon`. Reward = goodput (requests/s served within their
    SLO) of the period that followed the choice, as `V_long` measured it."""

    epsilon: float = 0.1
    seed: int = 0
    name: str = "bandit"
    _rng: random.Random = field(init=False, repr=False)
    _stats: dict[str, dict[str, list[float]]] = field(default_factory=dict, repr=False)
    _pending: tuple[str, str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def choose(self, view: LongView, current: str, pool: Sequence[str]) -> Choice:
        if not pool:
            return Choice(current, "empty pool: keep")
        ctx = context_of(view)
        stats = self._stats.setdefault(ctx, {})
        untried = [p for p in pool if p not in stats]
        if untried:
            policy, reason = untried[0], f"{ctx}: try"
        elif self._rng.random() < self.epsilon:
            policy, reason = self._rng.choice(list(pool)), f"{ctx}: explore"
        else:
            policy = max(pool, key=lambda p: (stats[p][0] / stats[p][1], -list(pool).index(p)))
            reason = f"{ctx}: best mean {stats[policy][0] / stats[policy][1]:.3g}"
        self._pending = (ctx, policy)
        return Choice(policy, reason)

    def reward(self, view: LongView) -> None:
        if self._pending is None:
            return
        ctx, policy = self._pending
        total = self._stats.setdefault(ctx, {}).setdefault(policy, [0.0, 0.0])
        total[0] += view.goodput_rps
        total[1] += 1.0
        self._pending = None

    def late(self, now: float) -> Choice | None:
        return None

    def snapshot(self) -> Any:
        return {"stats": self._stats}

    def restore(self, data: Any) -> None:
        if not (isinstance(data, dict) and isinstance(data.get("stats"), dict)):
            return
        stats: dict[str, dict[str, list[float]]] = {}
        for c, arms in data["stats"].items():
            if not isinstance(arms, dict):
                continue
            for p, v in arms.items():
                ok = (
                    isinstance(v, list)
                    and len(v) == 2
                    and all(isinstance(x, int | float) for x in v)
                )
                if ok and v[1] >= 1:
                    stats.setdefault(str(c), {})[str(p)] = [float(v[0]), float(v[1])]
        self._stats = stats


def build_selector(name: str, seed: int = 0) -> Selector:
    """`rules` or `bandit` (`llm` needs its model's params: `control.meta.build_controller`)."""
    if name == "rules":
        return RulesSelector()
    if name == "bandit":
        return BanditSelector(seed=seed)
    raise ValueError(f"unknown selector {name!r} (rules, bandit)")
