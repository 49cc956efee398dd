"""Prometheus metrics of one gateway (its own registry, so several apps can live in one process).

Tenant labels are redacted as configured (`ARBITER_METRICS_TENANT_LABELS`):

- `name`: the tenant's name.
- `hash`: `t-` + 12 hex digits of SHA-256 of the name: series stay per tenant, and an operator
  who knows a name can find its series, but a reader cannot list the tenants. (Pseudonymous,
  not secret: a guessed name can be checked.)
- `none`: no tenant label at all; per-tenant series are summed.
- `auto` (default): `name` when `/metrics` needs a token (`ARBITER_METRICS_TOKEN`), else
  `hash`. The gateway's port is the tenants' port, so an open `/metrics` must not tell one
  tenant who the others are; an operator who sets the token gets names for dashboards.

Several gateway processes behind one port (`arbiter up --gateways N`, `arbiter gateway
--processes N`) run with `PROMETHEUS_MULTIPROC_DIR` set: each process writes its series to its
own file there (prometheus_client's multiprocess mode), and `/metrics` of any of them sums the
files of all, so a scrape of the shared port sees the whole group, whichever process answers.
Series of a process that exited stay in the sum (the group's counters never go backwards).
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram

if TYPE_CHECKING:
    from control_plane.gateway.flight import Flight
    from control_plane.settings import Settings

TenantLabels = Literal["name", "hash", "none"]
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""Set for a group of gateway processes: the directory their series are shared through."""

_LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


def tenant_labels(settings: Settings) -> TenantLabels:
    """The effective tenant-label mode (`auto` resolved; see the module docstring)."""
    mode = settings.metrics_tenant_labels
    if mode == "auto":
        return "name" if settings.metrics_token else "hash"
    return mode


def hashed_tenant(name: str) -> str:
    return "t-" + hashlib.sha256(name.encode()).hexdigest()[:12]


class GatewayMetrics:
    """Counters and histograms exposed on the gateway's `/metrics`.

    Tenant labels follow `tenant_labels` (see the module docstring); with `none` the per-tenant
    series have no tenant label. `arbiter_gateway_rejected{reason}` counts every refusal at the
    door by its error code (authentication failures and 429s alike);
    `arbiter_gateway_failed{code}` every answer of Redis or the scheduler unavailable and
    every internal error, on the tenant and the admin API (a request withdrawn while waiting
    is counted in `arbiter_gateway_withdrawn` instead, a worker failure as a request finished
    with `error`). `registry` is what
    `/metrics` exposes: this object's series, or, in a group of processes (`MULTIPROCESS_ENV`
    set), the sum over the group.
    """

    def __init__(self, tenant_labels: TenantLabels = "hash") -> None:
        self.tenant_labels: TenantLabels = tenant_labels
        by_tenant = [] if tenant_labels == "none" else ["tenant"]
        own = CollectorRegistry()
        group = _group_registry(os.environ.get(MULTIPROCESS_ENV))
        self.registry = own if group is None else group
        self.requests = Counter(
            "arbiter_gateway_requests",
            "Requests finished, by status",
            [*by_tenant, "status"],
            registry=own,
        )
        self.rejected = Counter(
            "arbiter_gateway_rejected",
            "Requests refused at the door, by error code",
            ["reason"],
            registry=own,
        )
        self.failures = Counter(
            "arbiter_gateway_failed",
            "Answers of Redis or the scheduler unavailable, and internal errors (tenant and "
            "admin API), by error code",
            ["code"],
            registry=own,
        )
        self.withdrawals = Counter(
            "arbiter_gateway_withdrawn",
            "Queued requests withdrawn",
            ["reason"],
            registry=own,
        )
        self.events_dropped = Counter(
            "arbiter_gateway_events_dropped",
            "Events that could not be sent in any form (each logged), by type",
            ["type"],
            registry=own,
        )
        self.tokens = Counter(
            "arbiter_gateway_output_tokens",
            "Output tokens relayed",
            by_tenant,
            registry=own,
        )
        self.queue = Histogram(
            "arbiter_gateway_queue_seconds",
            "Time from submit to grant",
            by_tenant,
            buckets=_LATENCY_BUCKETS,
            registry=own,
        )
        self.overhead = Histogram(
            "arbiter_gateway_overhead_seconds",
            "Time spent in Arbiter before the answer starts",
            buckets=_LATENCY_BUCKETS,
            registry=own,
        )

    def completed(self, flight: Flight, status: str) -> None:
        tenant = self._tenant(flight.job.tenant)
        self.requests.labels(*tenant, status).inc()
        (self.tokens.labels(*tenant) if tenant else self.tokens).inc(flight.stats.n_out)
        if flight.granted_at is not None:
            queue = self.queue.labels(*tenant) if tenant else self.queue
            queue.observe(flight.queue_ms() / 1000.0)
            self.overhead.observe(flight.overhead_ms() / 1000.0)

    def _tenant(self, name: str) -> tuple[str, ...]:
        if self.tenant_labels == "none":
            return ()
        return (hashed_tenant(name) if self.tenant_labels == "hash" else name,)

    def withdrawn(self, reason: str) -> None:
        self.withdrawals.labels(reason).inc()

    def refused(self, reason: str) -> None:
        self.rejected.labels(reason).inc()

    def failed(self, code: str) -> None:
        self.failures.labels(code).inc()

    def dropped(self, event: object) -> None:
        self.events_dropped.labels(type(event).__name__).inc()


def _group_registry(directory: str | None) -> CollectorRegistry | None:
    """A registry summing every process's series under `directory` (None: not in a group)."""
    if not directory:
        return None
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, directory)  # type: ignore[no-untyped-call]
    return registry
