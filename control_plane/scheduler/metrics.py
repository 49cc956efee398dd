"""Prometheus metrics of one scheduler replica."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from control_plane.scheduler.dead_letter_counts import DeadLetterCounts
from control_plane.scheduler.fairness_view import NodeFairness

NODE_LABELS = ("level", "tenant", "app", "agent")
MAX_NODE_SERIES = 2_000
"""Nodes exported per scrape; beyond it the busiest are kept (`arbiter_node_series_dropped`)."""

_NODE_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("queued", "arbiter_node_queued", "Requests queued under the node"),
    ("inflight", "arbiter_node_inflight", "Requests running under the node"),
    (
        "oldest_wait_s",
        "arbiter_node_oldest_wait_seconds",
        "Age of the node's earliest queued request (0 when none waits)",
    ),
    ("counter", "arbiter_node_virtual_counter", "Virtual token counter (VTC/WFQ/HMFS)"),
    ("credit", "arbiter_node_credit", "ExFairS credit balance"),
    ("safi", "arbiter_node_safi", "SLO-aware fairness index among its level (lower is better)"),
    (
        "service_rate",
        "arbiter_node_service_rate",
        "Unified Tokens per second served over the ledger window",
    ),
    (
        "slo_attainment",
        "arbiter_node_slo_attainment",
        "Share of requests completed in the window within their SLO (absent: none completed)",
    ),
)


Snapshot = tuple[Sequence[NodeFairness], str, dict[str, Any]]
"""Per-node rows, the active policy's name and its params."""


class FairnessCollector(Collector):
    """Per-node fairness gauges and the active policy, computed when Prometheus scrapes.

    Rule: the leader hands `serve` a function that reads its core (called by `collect`, so in
    the event loop that serves `/metrics`: no work between scrapes, nothing on the scheduling
    loop); `clear` withdraws it when this replica stops leading, so only the leader exports
    nodes. Guarantee: at most `max_series` nodes per scrape, the busiest (queued, in flight,
    then service rate) first; how many were left out is exported.
    """

    def __init__(self, max_series: int = MAX_NODE_SERIES) -> None:
        self.max_series = max_series
        self._snapshot: Callable[[], Snapshot] | None = None

    def serve(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def clear(self) -> None:
        self._snapshot = None

    def collect(self) -> Iterator[Metric]:
        rows: Sequence[NodeFairness] = ()
        left_out = 0
        policy: tuple[str, str] | None = None
        if self._snapshot is not None:
            every, policy_name, params = self._snapshot()
            busiest = sorted(every, key=lambda r: (-r.queued, -r.inflight, -r.service_rate, r.path))
            rows = sorted(busiest[: self.max_series], key=lambda r: r.path)
            left_out = len(every) - len(rows)
            policy = (policy_name, json.dumps(params, sort_keys=True))
        for attr, name, doc in _NODE_GAUGES:
            family = GaugeMetricFamily(name, doc, labels=NODE_LABELS)
            for row in rows:
                value = getattr(row, attr)
                if value is not None:
                    family.add_metric(_labels(row), float(value))
            yield family
        dropped = GaugeMetricFamily(
            "arbiter_node_series_dropped", "Nodes left out of the node gauges (series cap)"
        )
        dropped.add_metric([], float(left_out))
        yield dropped
        info = InfoMetricFamily("arbiter_policy", "The active scheduling policy", labels=())
        if policy is not None:
            info.add_metric([], {"policy": policy[0], "params": policy[1]})
        yield info


def _labels(row: NodeFairness) -> list[str]:
    path = list(row.path) + [""] * (3 - len(row.path))
    return [row.level, *path]


class SchedulerMetrics:
    """Leadership, queue and dispatch metrics on the scheduler's `/metrics`, plus the
    per-node fairness gauges of `FairnessCollector` and every consumer's dead-letter counts
    (`DeadLetterCounts`) while this replica leads."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.leader = Gauge("arbiter_scheduler_leader", "1 while this replica leads", registry=r)
        self.queue_depth = Gauge("arbiter_scheduler_queue_depth", "Pending requests", registry=r)
        self.inflight = Gauge("arbiter_scheduler_inflight", "Requests running", registry=r)
        self.arrivals = Counter("arbiter_scheduler_arrivals", "Arrivals read", registry=r)
        self.dispatched = Counter(
            "arbiter_scheduler_dispatched", "Grants written", ["worker"], registry=r
        )
        self.completed = Counter(
            "arbiter_scheduler_completed", "Completions applied", ["status"], registry=r
        )
        self.audit_ended = Counter(
            "arbiter_scheduler_audit_ended",
            "Requests ended by the in-flight audit: done in Redis, completion never applied",
            registry=r,
        )
        self.decide_seconds = Histogram(
            "arbiter_scheduler_decide_seconds",
            "Time to decide and grant one batch",
            buckets=(0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5),
            registry=r,
        )
        self.loop_late_seconds = Histogram(
            "arbiter_scheduler_loop_late_seconds",
            "How late the event loop ran a 100 ms timer (a blocked loop delays lease renewals)",
            buckets=(0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0),
            registry=r,
        )
        self.fairness = FairnessCollector()
        r.register(self.fairness)
        self.dead_letters = DeadLetterCounts()
        r.register(self.dead_letters)
        self.controller_active = Gauge(
            "arbiter_controller_active", "1 while the meta-controller chooses (auto)", registry=r
        )
        self.controller_view = Gauge(
            "arbiter_controller_view",
            "The meta-controller's last V_long, one series per field",
            ["field"],
            registry=r,
        )
        self.controller_limit = Gauge(
            "arbiter_controller_limit",
            "Per-worker dispatch caps the execution loop set (absent = uncapped)",
            ["limit"],
            registry=r,
        )
        self.controller_switches = Counter(
            "arbiter_controller_switches",
            "Automatic policy switches",
            ["to", "reason"],
            registry=r,
        )
        agent = ["tenant", "app", "agent"]
        self.agent_priority = Gauge(
            "arbiter_agent_priority",
            "Learned workflow priority of an agent (1 = served first by kairos)",
            agent,
            registry=r,
        )
        self.agent_converged = Gauge(
            "arbiter_agent_converged",
            "1 when an agent's remaining-latency distribution has converged",
            agent,
            registry=r,
        )

    def stop_leading(self) -> None:
        """Withdraw what only the leader exports (its nodes, policy and dead-letter counts)."""
        self.fairness.clear()
        self.dead_letters.clear()

    def export_workflows(self, learned: Sequence[Any]) -> None:
        """The orchestrator's per-agent priority and convergence (`Orchestrator.learned`)."""
        self.agent_priority.clear()
        self.agent_converged.clear()
        for app in learned:
            for a in app["agents"]:
                labels = (app["tenant"], app["app"], a["agent"])
                self.agent_converged.labels(*labels).set(1.0 if a["converged"] else 0.0)
                if a["priority"] is not None:
                    self.agent_priority.labels(*labels).set(float(a["priority"]))
