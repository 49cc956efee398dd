"""End to end, in the full simulator: VTC's bound on the service gap of backlogged tenants.

docs/algorithms.md §1 (the VTC paper's Theorem 4.4): two clients backlogged over an interval
receive weighted service differing by at most `2 · max(w_p · L_in, w_q · M)`, `L_in` the
longest prompt and `M` the tokens a worker holds at once (its KV capacity; the token fence
keeps the scheduler's reservations within it). Tokens are reported every engine step and the
gap is sampled after every change, so the measured gap is the exact one.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control_plane.core.job import Slo
from control_plane.sim.engine_loop import Simulator
from control_plane.sim.scenario import Scenario, parse_scenario
from control_plane.sim.setup import PolicySpec, build_setup
from control_plane.sim.workload import RequestSpec

Workload = tuple[dict[str, float], list[RequestSpec]]


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    """2–4 tenants with weights in {1, 2, 3}; each a burst or a stream of random requests."""
    count = draw(st.integers(2, 4))
    weights = {f"t{i}": float(draw(st.sampled_from([1, 2, 3]))) for i in range(count)}
    drafts = []
    for tenant in weights:
        start = draw(st.sampled_from([0.0, 0.0, 0.3, 1.0]))
        gap = draw(st.sampled_from([0.0, 0.005, 0.05, 0.2]))
        sizes = draw(
            st.lists(st.tuples(st.integers(1, 256), st.integers(1, 64)), min_size=3, max_size=30)
        )
        drafts += [(start + k * gap, tenant, n_in, n_out) for k, (n_in, n_out) in enumerate(sizes)]
    drafts.sort(key=lambda d: d[0])
    specs = [
        RequestSpec(
            f"r{i}", t, tenant, "default", "default", "llama3-8b", None, None, n_in, n_out, Slo(), 0
        )
        for i, (t, tenant, n_in, n_out) in enumerate(drafts)
    ]
    return weights, specs


def scenario(weights: dict[str, float], kv_tokens: int, seqs: int) -> Scenario:
    return parse_scenario(
        {
            "name": "vtc-bound",
            "duration_s": 30,
            "drain_s": 600,
            "cluster": [
                {"profile": "llama3-8b-a100", "kv_tokens": kv_tokens, "max_num_seqs": seqs}
            ],
            "scheduler": {
                "admission_params": {"token_fence": 1.0},
                "progress_s": 0,
                "queue_timeout_s": None,
            },
            "tenants": [{"name": t, "weight": w} for t, w in weights.items()],
            "classes": {
                "c": {
                    "prompt": {"dist": "fixed", "value": 1},
                    "output": {"dist": "fixed", "value": 1},
                }
            },
            "workload": [
                {"tenant": t, "class": "c", "arrival": {"process": "poisson", "rate": 0}}
                for t in weights
            ],
        }
    )


def worst_gap(s: Scenario, policy: str, specs: list[RequestSpec]) -> tuple[float, int]:
    setup = build_setup(s, PolicySpec(policy, policy), gap_sample_s=0.0)
    sim = Simulator(setup, specs)
    records = sim.run()
    assert all(r.status == "ok" for r in records)
    return sim.backlog.tracker.worst, setup.workers[0].engine.kv_capacity_tokens


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workload=workloads(),
    kv_tokens=st.sampled_from([512, 1024, 2048]),
    seqs=st.sampled_from([2, 4, 16]),
)
def test_vtc_keeps_the_service_gap_of_backlogged_tenants_bounded(
    workload: Workload, kv_tokens: int, seqs: int
) -> None:
    weights, specs = workload
    gap, m = worst_gap(scenario(weights, kv_tokens, seqs), "vtc", specs)
    bound = 2 * max(1.0 * max(s.n_in for s in specs), 2.0 * m)
    assert gap <= bound


def test_fcfs_breaks_the_bound_that_vtc_keeps() -> None:
    """The property has teeth: a heavy tenant's early burst under FCFS exceeds it."""
    specs = [
        RequestSpec(
            f"r{i}",
            0.0 if i < 60 else 0.01,
            "t0" if i < 60 else "t1",
            "default",
            "default",
            "llama3-8b",
            None,
            None,
            64,
            32,
            Slo(),
            0,
        )
        for i in range(120)
    ]
    s = scenario({"t0": 1.0, "t1": 1.0}, 512, 4)
    gaps = {p: worst_gap(s, p, specs) for p in ("fcfs", "vtc")}
    bound = 2 * max(64, 2 * gaps["vtc"][1])
    assert gaps["vtc"][0] <= bound < gaps["fcfs"][0]
