"""Selectors: the rules of H-MAS §4.4 and the contextual bandit."""

from __future__ import annotations

import dataclasses
from typing import Any

from control_plane.control.selectors import BanditSelector, RulesSelector, context_of
from control_plane.control.views import LongView

POOL = ["fcfs", "edf", "sjf", "two_lane", "wfq"]
CALM = LongView(
    t=0.0, span_s=30.0, arrival_rps=5.0, completion_rps=5.0, goodput_rps=5.0, prompt_mean=500,
    prompt_cv=0.5, out_mean=200, out_cv=0.5, t_tot_cv=0.5, long_fraction=0.0, tenants=3,
    jain_service=1.0, slo_share=1.0, violation_rate=0.0, ttft_miss_rate=0.0, tpot_miss_rate=0.0,
    ttft_p99_s=1.0, queued=0, queue_growth_rps=0.0,
)  # fmt: skip


def view(**changes: Any) -> LongView:
    return dataclasses.replace(CALM, **changes)


def test_each_rule_fires_on_its_symptom_first_match_wins() -> None:
    rules = RulesSelector()
    assert rules.choose(CALM, "sjf", POOL).policy == "sjf"  # calm: keep
    hot = {"queue_growth_rps": 1.0, "violation_rate": 0.5}
    assert rules.choose(view(**hot, jain_service=0.5), "fcfs", POOL).reason == "unfair"
    mixed = view(**hot, t_tot_cv=2.0, ttft_miss_rate=0.4, long_fraction=0.2)
    assert rules.choose(mixed, "fcfs", POOL).policy == "two_lane"
    assert rules.choose(view(**hot), "fcfs", POOL).policy == "edf"
    growing = view(queue_growth_rps=1.0, violation_rate=0.1)
    assert rules.choose(growing, "fcfs", POOL).policy == "sjf"
    assert rules.choose(growing, "fcfs", ["fcfs", "edf"]).policy == "fcfs"  # sjf not in pool
    rules.reward(CALM)  # rules do not learn


def test_after_calm_periods_in_a_row_the_rules_return_home() -> None:
    rules = RulesSelector(home="fcfs", calm_periods=2)
    hot = view(queue_growth_rps=1.0, violation_rate=0.1)
    assert rules.choose(hot, "fcfs", POOL).policy == "sjf"
    assert rules.choose(CALM, "sjf", POOL).reason == "calm"  # one calm period: keep
    assert rules.choose(hot, "sjf", POOL).policy == "sjf"  # pressure again: the count restarts
    assert rules.choose(CALM, "sjf", POOL).policy == "sjf"
    back = rules.choose(CALM, "sjf", POOL)
    assert (back.policy, back.reason) == ("fcfs", "calm: back to fcfs")
    again = RulesSelector(home="fcfs")
    again.restore(rules.snapshot())
    assert again.choose(CALM, "edf", POOL).policy == "fcfs"  # the count survives a checkpoint
    assert RulesSelector(home="fcfs").choose(CALM, "edf", ["edf"]).policy == "edf"  # not in pool


def test_the_bandit_tries_every_arm_then_exploits_the_best_mean() -> None:
    bandit = BanditSelector(epsilon=0.0, seed=1)
    rewards = {"fcfs": 1.0, "edf": 0.5, "sjf": 3.0, "two_lane": 2.0, "wfq": 0.1}
    tried = []
    for _ in POOL:
        choice = bandit.choose(CALM, "fcfs", POOL)
        tried.append(choice.policy)
        bandit.reward(view(goodput_rps=rewards[choice.policy]))
    assert tried == POOL
    assert bandit.choose(CALM, "fcfs", POOL).policy == "sjf"
    other = view(queue_growth_rps=1.0)
    assert context_of(other) != context_of(CALM)
    assert bandit.choose(other, "sjf", POOL).reason.endswith("try")  # contexts learn apart
    again = BanditSelector(epsilon=0.0)
    again.restore(bandit.snapshot())
    assert again.choose(CALM, "fcfs", POOL).policy == "sjf"
