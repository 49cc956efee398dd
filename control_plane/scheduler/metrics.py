"""Prometheus metrics of one scheduler replica."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class SchedulerMetrics:
    """Leadership, queue and dispatch metrics on the scheduler's `/metrics`."""

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
        self.decide_seconds = Histogram(
            "arbiter_scheduler_decide_seconds",
            "Time to decide and grant one batch",
            buckets=(0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5),
            registry=r,
        )
