"""Process settings (pydantic-settings, prefix `ARBITER_`). Nothing is created at import time:
call `Settings()` where a process starts and pass the object down."""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Every knob a process reads from its environment; defaults suit one machine."""

    model_config = SettingsConfigDict(env_prefix="ARBITER_", extra="ignore")

    redis_url: str = "redis://127.0.0.1:6379/0"
    cluster: str = "default"
    """Redis key prefix `arb:{cluster}:` — one hash slot per cluster."""
    database_url: str = "sqlite:///./arbiter.db"
    admin_token: str = Field(default="", repr=False)
    """Bearer token for `/admin`; empty disables the admin API."""

    gateway_id: str = ""
    """Unique per gateway replica (grants are routed to it); empty → generated at start."""
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 1_048_576
    queue_timeout_s: float = 300.0
    """A request not granted within this time gets a 504 (OpenAI error shape)."""
    default_queue_cap: int = 256
    """Per-tenant cap on queued requests unless the tenant record sets one."""
    strict_hierarchy: bool = False
    """When true, unknown applications/agents in headers are rejected instead of created."""
    default_max_tokens: int = 512
    """Output bound assumed for scheduling when a request sets no `max_tokens`."""
    progress_interval_s: float = 0.1
    upstream_connect_timeout_s: float = 5.0
    gateway_heartbeat_s: float = Field(default=1.0, gt=0)
    """How often a gateway replica refreshes its liveness in Redis."""
    gateway_dead_after_s: float = Field(default=5.0, gt=0)
    """A gateway replica silent this long is lost: once the scheduler leader has seen it lost for
    2 more heartbeats, it releases its queued requests (`withdrawn`) and its granted ones
    (`aborted`). At least 3 heartbeats, so a replica that is merely slow is not taken for lost."""
    gateway_sweep_interval_s: float = Field(default=1.0, gt=0)
    """How often the scheduler leader looks for lost gateway replicas."""

    workers: str = ""
    """Comma-separated worker URLs the leader registers on start (`url` or `url|max_num_seqs`);
    workers can also be registered through the admin API."""
    policy: str = "vtc"
    lease_ttl_s: float = 2.0
    scrape_interval_s: float = 0.5
    tick_interval_s: float = 0.5
    """How often the leader calls the policy's and admission's `tick` (time-driven work)."""
    worker_failure_cooldown_s: float = 5.0
    """After a gateway reports a worker failure, no dispatch to it for this long, and then only
    once a health check passes."""
    checkpoint_interval_s: float = 1.0
    scheduler_port: int = 9090

    recorder_batch: int = 200
    recorder_interval_s: float = 0.25
    recorder_claim_idle_s: float = 30.0
    """Events a dead recorder read but never acknowledged are taken over after this idle time
    (checked every third of it)."""

    log_level: str = "INFO"

    @model_validator(mode="after")
    def _liveness_margin(self) -> Settings:
        if self.gateway_dead_after_s < 3 * self.gateway_heartbeat_s:
            raise ValueError("gateway_dead_after_s must be at least 3 × gateway_heartbeat_s")
        return self

    def static_workers(self) -> list[dict[str, object]]:
        """Registry records for `workers` (id = host:port)."""
        out: list[dict[str, object]] = []
        for item in filter(None, (w.strip() for w in self.workers.split(","))):
            url, _, seqs = item.partition("|")
            url = url.rstrip("/")
            rec: dict[str, object] = {"id": url.split("://", 1)[-1], "url": url, "kind": "vllm"}
            if seqs.isdigit():
                rec["max_num_seqs"] = int(seqs)
            out.append(rec)
        return out
