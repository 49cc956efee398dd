"""The orchestrator fed as the dispatcher feeds it: workflows close when idle, agents learn
remaining latency, scores rank the agent nearer its workflow's end first, state survives."""

from __future__ import annotations

import subprocess
import sys

import pytest

from control_plane.admission.registry import build_admission
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.job import Job
from control_plane.core.policy import PolicyContext
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.core.worker_view import WorkerView
from control_plane.core.workflows.orchestrator import Orchestrator
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy


def call(
    orch: Orchestrator, wf: str, agent: str, upstream: str | None, t: float, dur: float
) -> None:
    job = Job(f"{wf}-{agent}-{t}", "acme", t, 10, 10, app="qa", agent=agent, workflow=wf)
    job.upstream = upstream
    orch.on_arrival(job, t)
    job.dispatched_at = t
    orch.on_finish(job, 10, t + dur)


def run_qa(orch: Orchestrator, n: int) -> float:
    """`n` workflows router (1 s) → writer (4 s), 10 s apart; returns the last time."""
    t = 0.0
    for i in range(n):
        call(orch, f"w{i}", "router", None, t, 1.0)
        call(orch, f"w{i}", "writer", "router", t + 1.0, 4.0)
        t += 10.0
        orch.tick(t)
        orch.refresh(t)
    return t


def test_workflows_close_when_idle_and_build_the_graph() -> None:
    orch = Orchestrator(idle_s=2.0)
    run_qa(orch, 3)
    graph = orch.graphs[("acme", "qa")]
    assert graph.workflows == 3 and graph.frequency("router", "writer") == 1.0
    assert list(orch.agents[("acme", "qa", "router")].remaining.values) == [5.0, 5.0, 5.0]
    assert list(orch.agents[("acme", "qa", "writer")].single.values) == [4.0, 4.0, 4.0]


def test_a_workflow_with_a_call_outstanding_stays_open() -> None:
    orch = Orchestrator(idle_s=1.0)
    call(orch, "w", "router", None, 0.0, 1.0)
    queued = Job("q", "acme", 1.5, 10, 10, app="qa", agent="writer", workflow="w")
    assert orch.on_arrival(queued, 1.5) == 0.0  # the workflow started with the router
    orch.tick(60.0)
    assert ("acme", "qa") not in orch.graphs
    orch.on_withdrawn(queued)
    orch.tick(61.0)
    assert orch.graphs[("acme", "qa")].workflows == 1


def test_the_agent_nearer_its_workflows_end_scores_lower_once_converged() -> None:
    orch = Orchestrator(idle_s=2.0, recompute_s=0.0)
    run_qa(orch, 40)
    router, writer = ("acme", "qa", "router"), ("acme", "qa", "writer")
    assert orch.agents[writer].remaining.converged
    assert orch.score(writer) < orch.score(router)
    assert orch.score(("acme", "qa", "new")) == orch.score(("acme", "qa", "new2"))


def test_open_workflows_and_windows_are_bounded() -> None:
    orch = Orchestrator(window=16, max_open=5, idle_s=1e9)
    for i in range(50):
        job = Job(f"j{i}", "acme", float(i), 1, 1, app="qa", agent="a", workflow=f"w{i}")
        orch.on_arrival(job, float(i))
    assert len(orch._open) == 5
    run_qa(orch, 1)
    assert all(len(s.remaining.values) <= 16 for s in orch.agents.values())


def test_snapshot_restore_keeps_what_was_learned() -> None:
    orch = Orchestrator(idle_s=2.0, recompute_s=0.0)
    run_qa(orch, 20)
    again = Orchestrator()
    again.restore(orch.snapshot())
    assert again.scores == orch.scores
    assert again.graphs[("acme", "qa")].to_json() == orch.graphs[("acme", "qa")].to_json()
    assert again.stages(("acme", "qa", "router")) == 1


class Probe:
    def view(
        self, inflight: int, inflight_tokens: int, prefilling: int = 0, prefill_tokens: int = 0
    ) -> WorkerView:
        return WorkerView("w", "default", 8, 100_000, inflight=inflight)


def test_a_requeued_call_is_counted_once() -> None:
    """Re-queued after a worker failure: the scheduler core gives the dispatch back to the
    orchestrator and to the slot dispatcher before queueing it again."""
    ctx = PolicyContext()
    placement = build_placement("kairos_slots")
    policy = build_policy("kairos", ctx)
    core = SchedulerCore(Dispatcher(policy, build_admission("capacity", None), placement))
    core.set_workers({"w": Probe()})
    job = Job("j", "acme", 0.0, 10, 10, app="qa", agent="a", workflow="wf")
    core.arrive(job, None, 0.0)
    assert [d.job.id for d in core.decide(0.0)] == ["j"]
    assert placement.snapshot()["running"] == 1
    core.arrive(job, None, 1.0)  # its worker failed: queued again
    (wf,) = ctx.workflows._open.values()
    assert wf.outstanding == 1
    assert placement.snapshot()["running"] == 0


def test_a_malformed_checkpoint_changes_nothing() -> None:
    orch = Orchestrator(idle_s=2.0, recompute_s=0.0)
    run_qa(orch, 5)
    bad = {**orch.snapshot(), "scores": [["only", "two"]]}
    with pytest.raises(ValueError):
        orch.restore(bad)
    assert orch.graphs[("acme", "qa")].workflows == 5


def test_a_workflow_seen_from_mid_way_teaches_no_graph() -> None:
    """After a leader fail-over the new leader sees workflows from mid-way: a call arriving
    with an upstream but no earlier call, or a call ending that it never saw arrive. Those
    fragments would add false entry edges and too-short remaining latencies; only their
    single-call latencies are kept."""
    orch = Orchestrator(idle_s=2.0)
    call(orch, "w1", "writer", "router", 0.0, 4.0)  # the router ran before the fail-over
    late = Job("w2-writer", "acme", 0.0, 10, 10, app="qa", agent="writer", workflow="w2")
    late.upstream, late.dispatched_at = "router", 0.5
    orch.on_finish(late, 10, 3.0)  # arrived (and started) before the fail-over
    orch.tick(10.0)
    assert ("acme", "qa") not in orch.graphs
    writer = orch.agents[("acme", "qa", "writer")]
    assert list(writer.single.values) == [4.0, 2.5] and writer.remaining.seen == 0
    run_qa(orch, 1)  # a workflow seen from its entry call is learned as before
    assert orch.graphs[("acme", "qa")].workflows == 1


class _WalkAll(Orchestrator):
    """The tick as one walk over every open workflow (nothing held from the last tick)."""

    def tick(self, now: float) -> None:
        self._unstale()
        super().tick(now)


def _order(orch: Orchestrator) -> list[tuple[str, str, str]]:
    return [*orch._stale, *orch._open]


@pytest.mark.parametrize("seed", range(6))
def test_a_tick_closes_what_one_walk_over_every_workflow_closes(seed: int) -> None:
    """Workflows a tick found idle with calls outstanding are not walked again; arrivals,
    withdrawals, finishes, evictions and a clock going back leave the same workflows closed,
    in the same order, as walking all of them every tick."""
    import random

    rng = random.Random(seed)
    fast, slow = Orchestrator(idle_s=3.0, max_open=40), _WalkAll(idle_s=3.0, max_open=40)
    queued: list[Job] = []
    t = 0.0
    for i in range(3000):
        t += rng.random() * 0.5 if rng.random() > 0.02 else -rng.random() * 5.0
        op = rng.random()
        if op < 0.4 or not queued:
            wf = f"w{rng.randrange(60)}" if rng.random() < 0.7 else None
            job = Job(f"j{i}", "acme", t, 10, 10, app="qa", agent=f"a{i % 3}", workflow=wf)
            queued.append(job)
            for orch in (fast, slow):
                orch.on_arrival(job, t)
        elif op < 0.55:
            job = queued.pop(rng.randrange(len(queued)))
            for orch in (fast, slow):
                orch.on_withdrawn(job)
        elif op < 0.8:
            job = queued.pop(rng.randrange(len(queued)))
            job.dispatched_at = job.arrival
            for orch in (fast, slow):
                orch.on_finish(job, 10, t)
        else:
            for orch in (fast, slow):
                orch.tick(t)
        assert _order(fast) == _order(slow)
    assert fast._stale  # the fast path was taken
    assert fast.snapshot() == slow.snapshot()
    assert {a: g.to_json() for a, g in fast.graphs.items()} == {
        a: g.to_json() for a, g in slow.graphs.items()
    }


def test_the_single_call_mode_follows_a_changed_latency_after_a_long_run() -> None:
    """After 4,000 calls near 2 s the agent's calls take 20 s: once a window's worth of them
    replaced the old ones, the mode (the KV dispatcher's predicted call time) says so. Before,
    it was recomputed only when the count seen grew by a quarter (1,000 more calls here)."""
    orch = Orchestrator()
    key = ("acme", "qa", "writer")
    stats = orch._stats(key)
    for k in range(4000):
        stats.single.add(2.0 + 0.01 * (k % 7))
    assert orch.single_call_mode(key) == pytest.approx(2.03, abs=0.05)
    for k in range(stats.single.window + 10):
        stats.single.add(20.0 + 0.1 * (k % 7))
    mode = orch.single_call_mode(key)
    assert mode is not None and mode > 15.0


def test_scipy_is_loaded_only_when_a_mode_or_a_distance_is_estimated() -> None:
    """Regression: this module imported scipy.stats at import, and the gateways import it
    (the admin API's knob rules reach the policies) without estimating anything: 75 MB of
    each gateway process (216 → 141 MB, docs/performance.md)."""
    script = (
        "import sys\n"
        "import control_plane.api.app, control_plane.api.admin\n"
        "print('scipy.stats' in sys.modules)\n"
        "import numpy as np\n"
        "from control_plane.core.workflows.orchestrator import kde_mode\n"
        "mode = kde_mode(np.array([1.0, 2.0, 2.1, 2.2, 5.0]))\n"
        "print(1.5 < mode < 2.5, 'scipy.stats' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr
