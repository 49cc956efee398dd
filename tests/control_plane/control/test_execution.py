"""The execution loop: a prefill cap that trades TTFT for TPOT, and the dual loop on KV usage."""

from __future__ import annotations

import pytest

from control_plane.control.execution import ExecutionControl, ExecutionParams
from control_plane.control.meta import AutoParams, build_controller
from control_plane.control.views import ShortView
from control_plane.core.worker_view import WorkerView
from control_plane.policies.registry import build_policy
from tests.control_plane.control.test_meta import core_with, unset

IDLE = [WorkerView(id="w", model="m", max_num_seqs=64, kv_tokens=10_000, kv_usage=0.2)]


def short(tpot_only: float, ttft_only: float, completions: int = 20) -> ShortView:
    return ShortView(0.0, 0, 0, 0.0, None, completions, ttft_only, tpot_only)


def run(ctl: ExecutionControl, views: list[ShortView], t0: float = 0.0) -> float:
    """One call per 5 s period from `t0` (a first call only arms the period); the end time."""
    t = t0
    for v in views:
        t += 5.0
        ctl.step(t, lambda v=v: v, lambda: IDLE)  # type: ignore[misc]
    return t


def test_tpot_losses_tighten_the_prefill_cap_down_to_its_floor() -> None:
    ctl = ExecutionControl(ExecutionParams(prefill_max=8192, prefill_min=1024))
    run(ctl, [short(0.3, 0.1)] * 6)
    assert ctl.limits.prefill_tokens == 1024
    caps = [c.limits["prefill_tokens"] for c in ctl.changes]
    assert caps == [8192, 4096, 2048, 1024]
    assert ctl.changes[0].reason.startswith("tighten prefill")


def test_ttft_losses_or_calm_relax_it_until_uncapped() -> None:
    ctl = ExecutionControl(ExecutionParams(prefill_max=8192, prefill_min=1024))
    t = run(ctl, [short(0.3, 0.0)] * 4)
    assert ctl.limits.prefill_tokens == 2048
    run(ctl, [short(0.2, 0.4)] * 4 + [short(0.0, 0.0)] * 4, t)
    assert ctl.limits.prefill_tokens is None
    assert ctl.changes[-1].reason.startswith("relax prefill")


def test_too_few_completions_or_balanced_losses_hold_the_cap() -> None:
    ctl = ExecutionControl(ExecutionParams())
    t = run(ctl, [short(0.9, 0.0, completions=2)] * 3)
    assert ctl.limits.prefill_tokens is None
    t = run(ctl, [short(0.3, 0.0)], t)
    cap = ctl.limits.prefill_tokens
    assert cap is not None
    run(ctl, [short(0.2, 0.2)] * 3, t)  # as many lost each way: no evidence either way
    assert ctl.limits.prefill_tokens == cap


def test_high_kv_usage_caps_concurrency_and_budget_and_the_state_survives() -> None:
    hot = [WorkerView(id="w", model="m", max_num_seqs=64, kv_tokens=10_000, kv_usage=0.99)]
    ctl = ExecutionControl(ExecutionParams(n_max=64))
    for k in range(10):
        ctl.step(0.5 * k, lambda: short(0.0, 0.0), lambda: hot)
    assert ctl.limits.n_run is not None and ctl.limits.n_run < 64
    assert ctl.limits.token_budget is not None and ctl.limits.token_budget < 1.0
    again = ExecutionControl(ExecutionParams(n_max=64))
    again.restore(ctl.snapshot())
    assert again.limits == ctl.limits and again.loop.n_run == ctl.loop.n_run
    again.restore({"limits": "junk", "loop": {"budget": "x"}})  # malformed: no crash
    assert again.limits.off


def test_disabled_it_never_moves() -> None:
    ctl = ExecutionControl(ExecutionParams(enabled=False))
    run(ctl, [short(0.9, 0.0)] * 3)
    assert ctl.limits.off and not ctl.changes


def test_the_controller_applies_its_limits_to_the_core_and_checkpoints_them() -> None:
    ctl = build_controller({"period_s": 30.0, "execution": {"prefill_max": 4096}}, unset)
    assert ctl.execution is not None
    core = core_with(ctl)
    ctl.attach(core)
    assert core.dispatcher.limits is ctl.execution.limits
    ctl.execution.limits.prefill_tokens = 2048
    state = ctl.snapshot()
    fresh = build_controller({"period_s": 30.0, "execution": {"prefill_max": 4096}}, unset)
    fresh.restore(state)
    other = core_with(fresh)
    fresh.attach(other)
    assert other.dispatcher.limits.prefill_tokens == 2048
    other.switch_policy(build_policy("sjf", other.ctx), 1.0)
    assert other.dispatcher.limits.prefill_tokens == 2048  # a policy switch keeps the limits


def test_execution_params_are_validated_and_can_be_turned_off() -> None:
    with pytest.raises(ValueError, match="prefill_min"):
        AutoParams.model_validate({"execution": {"prefill_min": 9000, "prefill_max": 100}})
    with pytest.raises(ValueError):
        AutoParams.model_validate({"execution": {"typo": 1}})
    assert build_controller({"execution": {"enabled": False}}, unset).execution is None


def test_a_controller_without_the_loop_lifts_the_limits_a_previous_one_left() -> None:
    first = build_controller({"period_s": 30.0}, unset)
    core = core_with(first)
    first.attach(core)
    assert first.execution is not None
    first.execution.limits.prefill_tokens = 2048
    assert core.dispatcher.limits.prefill_tokens == 2048
    second = build_controller({"period_s": 30.0, "execution": {"enabled": False}}, unset)
    second.attach(core)
    assert core.dispatcher.limits.off
