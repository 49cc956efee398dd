"""Immutable records that repositories return and accept.

Callers never hold ORM objects: every repository method converts rows to these frozen
dataclasses, so nothing outside `storage/` touches SQLAlchemy, records are safe to cache and
share between threads, and no lazy load can fail after the session closes. Times are float
epoch seconds (UTC) everywhere; latencies and SLO targets are milliseconds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

ModelKind = Literal["llm", "vlm", "image", "video", "audio"]
WorkerKind = Literal["sim", "vllm"]
WorkerStatus = Literal["active", "draining", "drained"]
RequestStatus = Literal["ok", "error", "aborted", "timeout", "withdrawn"]
Level = Literal["tenant", "app", "agent"]

MODEL_KINDS: Final = ("llm", "vlm", "image", "video", "audio")
WORKER_KINDS: Final = ("sim", "vllm")
WORKER_STATUSES: Final = ("active", "draining", "drained")
REQUEST_STATUSES: Final = ("ok", "error", "aborted", "timeout", "withdrawn")
LEVELS: Final = ("tenant", "app", "agent")

DEFAULT_NAME: Final = "default"
"""Application/agent name used when a request names none."""


@dataclass(frozen=True, slots=True)
class TenantRecord:
    """A tenant: weight, priority tier (smaller = more urgent) and per-tenant limits."""

    id: int
    name: str
    weight: float
    priority_tier: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    slo_e2e_ms: float | None
    queue_cap: int | None
    rate_limit_rps: float | None
    token_budget: int | None
    """Input + output tokens allowed per UTC day; None = unlimited."""
    created_at: float


@dataclass(frozen=True, slots=True)
class AppRecord:
    """An application of a tenant, with its own weight and SLO defaults."""

    id: int
    tenant_id: int
    tenant: str
    name: str
    weight: float
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    slo_e2e_ms: float | None
    created_at: float


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """An agent of an application; `priority_tier` overrides the tenant's when set."""

    id: int
    app_id: int
    tenant: str
    app: str
    name: str
    weight: float
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    slo_e2e_ms: float | None
    priority_tier: int | None
    created_at: float


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """An API key's public face: its display prefix and state; never the key or its hash."""

    id: int
    tenant_id: int
    tenant: str
    prefix: str
    label: str | None
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True, slots=True)
class ModelRecord:
    """A served model: its kind and the shape that prices its tokens in Unified Tokens."""

    name: str
    kind: ModelKind
    hidden_size: int
    num_layers: int
    unified_cost_factor: float | None
    """Operator override of the factor derived from hidden size and layers."""
    max_model_len: int | None
    image_tokens: dict[str, Any] | None = None
    """A VLM's image-token rule, as JSON (validated by the admin API)."""
    generation: dict[str, Any] | None = None
    """An image model's generation rule (steps, sizes), as JSON (validated by the admin API)."""


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """A registered worker (simulated or real vLLM) and its drain state."""

    id: str
    url: str
    kind: WorkerKind
    model: str
    profile: str | None
    status: WorkerStatus
    max_num_seqs: int | None
    registered_at: float


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request, as the recorder writes it (one row per request id)."""

    id: str
    tenant: str
    arrival: float
    status: RequestStatus
    app: str = DEFAULT_NAME
    agent: str = DEFAULT_NAME
    model: str = DEFAULT_NAME
    workflow: str | None = None
    upstream: str | None = None
    task: str | None = None
    priority: int = 0
    dispatched_at: float | None = None
    first_token_at: float | None = None
    finished_at: float | None = None
    n_in: int = 0
    n_out: int = 0
    unified_cost: float = 0.0
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    slo_e2e_ms: float | None = None
    slo_violated: bool = False
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    queue_ms: float | None = None
    worker: str | None = None
    policy: str | None = None
    error: str | None = None
    attempts: int = 1
    images: int | None = None
    """Images generated (image models: `n_out` is images × denoising steps)."""


@dataclass(frozen=True, slots=True)
class RequestsWritten:
    """What one write of request rows did: rows inserted, and the ids of provisional rows
    (the in-flight audit's) it replaced with their real completion (`RequestRepo.write_many`)."""

    inserted: int
    replaced: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One audited change: who did what to which target, the old and new values, and why."""

    id: int
    at: float
    actor: str
    action: str
    target: str
    old: Any
    new: Any
    reason: str


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """A tenant's totals over a period (what `GET /v1/usage` shows)."""

    tenant: str
    since: float
    requests: int
    n_in: int
    n_out: int
    unified_service: float
    images: int = 0
    """Images generated (image models)."""


@dataclass(frozen=True, slots=True)
class AppNode:
    """An application and its agents in a hierarchy snapshot."""

    app: AppRecord
    agents: tuple[AgentRecord, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class TenantNode:
    """A tenant, its applications and their agents: the weights the scheduler loads."""

    tenant: TenantRecord
    apps: tuple[AppNode, ...] = field(default_factory=tuple)


R = TypeVar("R")


def record_from(cls: type[R], values: dict[str, Any]) -> R:
    """Build record `cls` from a dict holding (at least) every field of the record."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return cls(**{name: values[name] for name in names})
