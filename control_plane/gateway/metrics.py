"""Prometheus metrics of one gateway (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram

if TYPE_CHECKING:
    from control_plane.gateway.flight import Flight

_LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class GatewayMetrics:
    """Counters and histograms exposed on the gateway's `/metrics`."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "arbiter_gateway_requests",
            "Requests finished, by status",
            ["tenant", "status"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "arbiter_gateway_rejected",
            "Requests refused at the door",
            ["reason"],
            registry=self.registry,
        )
        self.withdrawals = Counter(
            "arbiter_gateway_withdrawn",
            "Queued requests withdrawn",
            ["reason"],
            registry=self.registry,
        )
        self.tokens = Counter(
            "arbiter_gateway_output_tokens",
            "Output tokens relayed",
            ["tenant"],
            registry=self.registry,
        )
        self.queue = Histogram(
            "arbiter_gateway_queue_seconds",
            "Time from submit to grant",
            ["tenant"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.overhead = Histogram(
            "arbiter_gateway_overhead_seconds",
            "Time spent in Arbiter before the answer starts",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )

    def completed(self, flight: Flight, status: str) -> None:
        tenant = flight.job.tenant
        self.requests.labels(tenant, status).inc()
        self.tokens.labels(tenant).inc(flight.stats.n_out)
        if flight.granted_at is not None:
            self.queue.labels(tenant).observe(flight.queue_ms() / 1000.0)
            self.overhead.observe(flight.overhead_ms() / 1000.0)

    def withdrawn(self, reason: str) -> None:
        self.withdrawals.labels(reason).inc()

    def refused(self, reason: str) -> None:
        self.rejected.labels(reason).inc()
