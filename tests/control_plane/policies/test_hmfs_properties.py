"""HMFS properties in simulated time (docs/algorithms.md §3)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control_plane.core.job import Job
from control_plane.core.policy import PolicyContext
from control_plane.core.unified import ModelShape, unit_factor
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.fairness import ShareMeter
from tests.control_plane.policies.service_loop import ServiceLoop
from tests.control_plane.policies.test_vtc_properties import context, workloads

_seq = itertools.count()
BASE = ModelShape("llm", hidden_size=2048, num_layers=24)
IMAGE = ModelShape("image", hidden_size=4096, num_layers=48)


def backlog(tenant: str, agents: int, per_agent: int, *, factor: float = 1.0) -> list[Job]:
    """`agents` agents of one application, each with `per_agent` requests queued at t=0."""
    jobs = []
    for g, i in itertools.product(range(agents), range(per_agent)):
        seq = next(_seq)
        n_in, out = 40 + (seq * 37) % 80, 10 + (seq * 53) % 40
        jobs.append(
            Job(
                id=f"{tenant}-g{g}-{i}",
                tenant=tenant,
                agent=f"g{g}",
                arrival=0.0,
                n_in=n_in,
                max_tokens=out,
                seq=seq,
                unit_factor=factor,
            )
        )
    return jobs


def overloaded_shares(
    policy_name: str, jobs: list[Job], params: dict[str, int] | None = None
) -> tuple[dict[tuple[str, ...], float], PolicyContext]:
    ctx = PolicyContext()
    policy = build_policy(policy_name, ctx, params)
    tenants = sorted({(j.tenant,) for j in jobs})
    meter = ShareMeter(tenants)
    ServiceLoop(policy, slots=8, kv_tokens=2048).run(
        jobs, observe=meter, stop=lambda loop: loop.now >= 200.0
    )
    return meter.shares(), ctx


def test_a_tenant_with_ten_agents_gets_the_share_of_a_tenant_with_one() -> None:
    jobs = backlog("many", agents=10, per_agent=300) + backlog("one", agents=1, per_agent=3000)
    shares, _ = overloaded_shares("hmfs", jobs)
    assert shares[("many",)] == pytest.approx(0.5, rel=0.05)
    assert shares[("one",)] == pytest.approx(0.5, rel=0.05)
    # Agent-level VTC is the multi-agent unfairness HMFS removes: 10 of 11 shares.
    flat, _ = overloaded_shares("vtc", [replace(j) for j in jobs], {"level": 3})
    assert flat[("many",)] == pytest.approx(10 / 11, rel=0.05)


def test_an_image_model_request_is_charged_by_its_unified_cost() -> None:
    factor = unit_factor(IMAGE, BASE)
    assert factor == 4.0
    ctx = PolicyContext()
    policy = build_policy("hmfs", ctx)
    image = Job(id="img", tenant="t", arrival=0.0, n_in=100, max_tokens=50, unit_factor=factor)
    loop = ServiceLoop(policy, slots=1, kv_tokens=1000)
    loop.run([image])
    unified = (1 * 100 + 2 * 50) * factor
    for node in (("t",), ("t", "default"), ("t", "default", "default")):
        assert ctx.ledger.service(node) == unified
        assert ctx.ledger.counter(node) == unified
    stats = ctx.ledger.stats(("t",))
    assert stats is not None and (stats.tokens_in, stats.tokens_out) == (100, 50)


def test_under_overload_unified_service_is_shared_not_raw_tokens() -> None:
    factor = unit_factor(IMAGE, BASE)
    jobs = backlog("image", 1, 3000, factor=factor) + backlog("text", 1, 3000)
    shares, ctx = overloaded_shares("hmfs", jobs)
    assert shares[("image",)] == pytest.approx(0.5, rel=0.05)

    def raw(tenant: str) -> float:
        stats = ctx.ledger.stats((tenant,))
        assert stats is not None
        return stats.tokens_in + 2 * stats.tokens_out

    assert raw("text") / raw("image") == pytest.approx(factor, rel=0.05)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=workloads(), slots=st.sampled_from([2, 4]), kv=st.sampled_from([96, 256]))
def test_with_one_app_and_one_agent_per_tenant_hmfs_is_vtc(
    workload: tuple[dict[str, float], list[Job]], slots: int, kv: int
) -> None:
    weights, jobs = workload
    orders = []
    for name in ("vtc", "hmfs"):
        loop = ServiceLoop(build_policy(name, context(weights)), slots=slots, kv_tokens=kv)
        loop.run([replace(j) for j in jobs])
        orders.append([(j.id, j.dispatched_at) for j in loop.finished])
    assert orders[0] == orders[1]
