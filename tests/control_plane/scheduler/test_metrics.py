"""The scheduler's workflow gauges: per-agent priority and convergence from what was learned."""

from __future__ import annotations

from prometheus_client import generate_latest

from control_plane.scheduler.metrics import SchedulerMetrics

LEARNED = [
    {
        "tenant": "acme",
        "app": "qa",
        "agents": [
            {"agent": "math", "converged": True, "priority": 1},
            {"agent": "router", "converged": False, "priority": None},
        ],
    }
]


def test_agent_gauges_follow_the_latest_learned_view() -> None:
    metrics = SchedulerMetrics()
    metrics.export_workflows(LEARNED)
    text = generate_latest(metrics.registry).decode()
    assert 'arbiter_agent_priority{agent="math",app="qa",tenant="acme"} 1.0' in text
    assert 'arbiter_agent_converged{agent="router",app="qa",tenant="acme"} 0.0' in text
    assert 'arbiter_agent_priority{agent="router"' not in text  # no score yet: no series
    metrics.export_workflows([])
    assert "arbiter_agent_converged{" not in generate_latest(metrics.registry).decode()
