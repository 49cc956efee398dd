"""The policy contract, checked on every registered policy."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control_plane.contracts.requests import Envelope, decode_envelope, encode_envelope
from control_plane.core.job import Job
from control_plane.core.ledger import Ledger
from control_plane.core.policy import Policy, PolicyContext, StopPop, switch_policy
from control_plane.policies.queues import DuplicateJobError
from control_plane.policies.registry import (
    PolicyParamsError,
    UnknownPolicyError,
    build_policy,
    names,
    policy_class,
)
from tests.control_plane.policies.harness import Harness, Op, ops_strategy
from tests.control_plane.policies.jobs import job

ALL = names()
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "hmfs[order=kairos]": ("hmfs", {"order": "kairos"}),
    "hmfs[depth=1,order=kairos]": ("hmfs", {"depth": 1, "order": "kairos"}),
}
"""Registered policies again with params that change how they order (ids for the cases)."""
CASES = [*ALL, *VARIANTS]
EXPECTED = {
    "fcfs",
    "rr",
    "vtc",
    "wfq",
    "hmfs",
    "exfairs",
    "edf",
    "sjf",
    "llf",
    "two_lane",
    "priority",
}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(case: str, ctx: PolicyContext) -> Policy:
    """The policy of a case: a registered name, or a `VARIANTS` id."""
    name, params = VARIANTS.get(case, (case, {}))
    return build_policy(name, ctx, params)


def run(name: str, ops: list[Op]) -> Harness:
    harness = Harness(build(name, PolicyContext()))
    harness.run(ops)
    return harness


def test_every_policy_of_the_issue_is_registered() -> None:
    assert set(ALL) >= EXPECTED
    for name in ALL:
        assert policy_class(name).name == name


@pytest.mark.parametrize("name", CASES)
@SETTINGS
@given(ops=ops_strategy)
def test_pop_honours_admit_and_nothing_is_lost(name: str, ops: list[Op]) -> None:
    harness = run(name, ops)  # asserts admit, work conservation and pending after every op
    harness.drain()  # asserts every pushed job left exactly once


@pytest.mark.parametrize("name", CASES)
@SETTINGS
@given(ops=ops_strategy)
def test_deterministic(name: str, ops: list[Op]) -> None:
    first, second = run(name, ops), run(name, ops)
    assert first.log == second.log
    assert json.dumps(first.policy.snapshot()) == json.dumps(second.policy.snapshot())
    assert first.drain() == second.drain()


@pytest.mark.parametrize("name", CASES)
@SETTINGS
@given(before=ops_strategy, after=ops_strategy, other=st.sampled_from(CASES))
def test_switch_keeps_every_pending_job(
    name: str, before: list[Op], after: list[Op], other: str
) -> None:
    harness = run(name, before)
    pending = {j.id for j in harness.policy.jobs()}
    old = harness.policy
    harness.policy = switch_policy(old, build(other, old.ctx), harness.now)
    assert {j.id for j in harness.policy.jobs()} == pending
    harness.run(after)
    harness.drain()


def copy(j: Job) -> Job:
    """The job as a leader reads it back from its envelope (JSON both ways)."""
    wire = json.loads(json.dumps(encode_envelope(Envelope(j))))
    return decode_envelope(wire).job


@pytest.mark.parametrize("name", CASES)
@SETTINGS
@given(before=ops_strategy, after=ops_strategy)
def test_snapshot_is_json_and_fail_over_continues_the_same_order(
    name: str, before: list[Op], after: list[Op]
) -> None:
    harness = run(name, before)
    policy_state = json.loads(json.dumps(harness.policy.snapshot()))
    ledger_state = json.loads(json.dumps(harness.policy.ctx.ledger.snapshot()))
    ledger = Ledger.from_snapshot(ledger_state)
    assert ledger.snapshot() == ledger_state

    state_name = policy_state["name"]
    standby = build_policy(state_name, PolicyContext(ledger=ledger), policy_state["params"])
    standby.restore(policy_state)
    standby.adopt([copy(j) for j in harness.policy.jobs()], harness.now)
    replica = Harness(standby)
    replica.now, replica.count = harness.now, harness.count
    replica.pending = {j.id: j for j in standby.jobs()}
    replica.pushed = list(replica.pending)
    replica.running = [copy(j) for j in harness.running]
    harness.log = []
    harness.run(after)
    replica.run(after)
    assert replica.log == harness.log
    assert replica.drain() == harness.drain()


@pytest.mark.parametrize("name", CASES)
@SETTINGS
@given(ops=ops_strategy, refusals=st.integers(0, 5))
def test_a_pop_aborted_by_stop_pop_changes_nothing(name: str, ops: list[Op], refusals: int) -> None:
    harness = run(name, ops)
    policy = harness.policy

    def state() -> tuple[list[str], str]:
        return [j.id for j in policy.jobs()], json.dumps(policy.snapshot())

    before, calls = state(), 0

    def admit(_: Job) -> bool:
        nonlocal calls
        calls += 1
        if calls > refusals:
            raise StopPop
        return False

    with contextlib.suppress(StopPop):
        assert policy.pop(harness.now, admit) is None
    assert state() == before


@pytest.mark.parametrize("name", ALL)
def test_unknown_params_are_rejected(name: str) -> None:
    with pytest.raises(PolicyParamsError):
        build_policy(name, PolicyContext(), {"no_such_knob": 1})


@pytest.mark.parametrize("name", CASES)
def test_a_job_id_cannot_be_pending_twice(name: str) -> None:
    policy = build(name, PolicyContext())
    policy.push(job("x"), 0.0)
    with pytest.raises(DuplicateJobError):
        policy.push(job("x"), 0.0)
    assert len(policy) == 1


def test_invalid_param_values_are_rejected() -> None:
    with pytest.raises(PolicyParamsError) as err:
        build_policy("exfairs", PolicyContext(), {"alpha": 2.0, "p_max": -1})
    fields = {e["loc"][0] for e in err.value.errors}
    assert fields == {"alpha", "p_max"}


def test_registry_resolves_module_paths_and_rejects_the_rest() -> None:
    policy = build_policy("control_plane.policies.fcfs:FcfsPolicy", PolicyContext())
    assert isinstance(policy, Policy) and policy.name == "fcfs"
    with pytest.raises(UnknownPolicyError):
        build_policy("no_such_policy", PolicyContext())
    with pytest.raises(UnknownPolicyError):
        build_policy("control_plane.core.job:Job", PolicyContext())
    with pytest.raises(UnknownPolicyError):
        build_policy("control_plane.policies.nothing:Here", PolicyContext())
