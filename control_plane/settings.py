"""Process settings (pydantic-settings, prefix `ARBITER_`). Nothing is created at import time:
call `Settings()` where a process starts and pass the object down."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from control_plane.contracts.knobs import PLUGIN_NAME_MAX
from control_plane.contracts.workers import CONFIG, WorkerEntry
from storage.engine import url_problem

_Rate = Annotated[float, Field(ge=0)]
_Burst = Annotated[int, Field(ge=1)]
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL", "NOTSET")
"""Python's own level names (`logging.getLevelNamesMapping()` also lists what libraries add
once imported, uvicorn's TRACE)."""


class Settings(BaseSettings):
    """Every knob a process reads from its environment; defaults suit one machine."""

    model_config = SettingsConfigDict(env_prefix="ARBITER_", extra="ignore")

    redis_url: str = Field(default="redis://127.0.0.1:6379/0", repr=False)
    """May carry a password (`arbiter up`'s private Redis always does): kept out of reprs."""
    redis_sentinels: str = ""
    """Comma-separated `host:port` of Redis Sentinels; when set, processes connect to the
    primary they name for `redis_sentinel_service` and follow fail-overs (`redis_url` then
    gives only the data nodes' password, database and TLS)."""
    redis_sentinel_service: str = "arbiter"
    """The Sentinel `monitor` name of Arbiter's Redis."""
    redis_sentinel_password: str = Field(default="", repr=False)
    """Password of the Sentinels themselves (`requirepass` in sentinel.conf); empty: none."""
    redis_multiplex: bool = True
    """The Lua scripts (every hot state write) share one pipelined connection per process
    instead of the pool's (`control_plane/state/mux.py`); not with Sentinel or TLS."""
    cluster: str = "default"
    """Redis key prefix `arb:{cluster}:` — one hash slot per cluster."""
    database_url: str = "sqlite:///./arbiter.db"
    admin_token: str = Field(default="", repr=False)
    """Bearer token for `/admin`; empty disables the admin API."""

    gateway_id: str = ""
    """Unique per gateway replica (grants are routed to it); empty → generated at start."""
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    queue_timeout_s: float = Field(default=300.0, gt=0)
    keep_alive_s: int = Field(default=75, ge=1)
    shutdown_grace_s: int = Field(default=10, ge=1)
    """On SIGTERM a gateway stops accepting and lets streams in flight run this long before
    cancelling them (uvicorn's graceful shutdown); an orchestrator's grace period must cover
    it (Kubernetes: preStop + this + the lifespan's stop, docs/operations.md)."""
    """How long the gateway keeps an idle client connection open (longer than clients keep
    theirs, so none reuses one the gateway is closing)."""
    lost_check_interval_s: float = Field(default=5.0, gt=0)
    """A request waiting for its grant this long checks that Redis still knows it (and again
    every interval): one that a restarted Redis lost is submitted again, instead of waiting
    for a grant that can never come until its queue timeout."""
    """A request not granted within this time gets a 504 (OpenAI error shape)."""
    default_queue_cap: int = Field(default=256, ge=1)
    """Per-tenant cap on queued requests unless the tenant record sets one."""
    strict_hierarchy: bool = False
    """When true, unknown applications/agents in headers are rejected instead of created."""
    tag_tasks: bool = True
    """Tag requests without `X-Arbiter-Task` with the rule tagger's task type (gateway)."""
    task_slo: bool = False
    """Give requests H-MAS Table 6's targets for their task where nothing else sets one."""
    image_hosts: list[str] = Field(default_factory=list)
    """Hosts whose `http(s)` image URLs a chat request may carry (`ARBITER_IMAGE_HOSTS`, a JSON
    list); others are refused with a 400 — send images as `data:` URLs."""
    default_max_tokens: int = Field(default=512, ge=1)
    """Output bound assumed for scheduling when a request sets no `max_tokens`."""
    progress_interval_s: float = Field(default=0.1, gt=0)
    upstream_connect_timeout_s: float = Field(default=5.0, gt=0)
    upstream_idle_timeout_s: float = Field(default=120.0, gt=0)
    """Longest silence from a worker (no byte of the status line or of the stream) before the
    request fails as a worker failure: a frozen or partitioned worker cannot hold a request
    until the client gives up. Generous, as a long prefill delays the first byte."""
    upstream_image_timeout_s: float = Field(default=900.0, gt=0)
    """The same bound for an image generation, whose worker sends nothing until every image
    of the request is done (a batch of large images at a busy worker takes minutes)."""
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
    policy: str = Field(default="vtc", min_length=1, max_length=PLUGIN_NAME_MAX)
    lease_ttl_s: float = Field(default=2.0, gt=0)
    no_leader_503_after_s: float | None = Field(default=None, gt=0)
    """A gateway answers 503 + Retry-After to requests waiting for a grant (and to new ones)
    once no scheduler leader has been seen (or Redis has not answered) for this long; unset →
    5 × `lease_ttl_s`, well past a normal failover (≤ 1.25 × TTL)."""
    leader_probe_interval_s: float = Field(default=0.25, gt=0)
    """How often a gateway checks that a scheduler leader holds the lease."""
    scrape_interval_s: float = Field(default=0.5, gt=0)
    tick_interval_s: float = Field(default=0.5, gt=0)
    """How often the leader calls the policy's and admission's `tick` (time-driven work)."""
    worker_failure_cooldown_s: float = Field(default=5.0, ge=0)
    """After a gateway reports a worker failure, no dispatch to it for this long, and then only
    once a health check passes."""
    fast_path: bool = True
    """The leader lends idle worker slots to the gateways' fast lane: a request of a model
    with nothing queued is granted in its submit script (docs/architecture.md §2). On by
    default: it only ever grants what the leader would grant at once (docs/performance.md,
    "The fast lane")."""
    fast_path_lend: int = Field(default=16, ge=1)
    """Most slots the leader keeps lent per worker (fewer when admission has less room)."""
    leader_events_gap_s: float = Field(default=0.02, ge=0.0, le=1.0)
    """While no request is queued, the leader waits this long after a batch of events
    before it reads the next (a request queued meanwhile ends the wait): at low load, one
    wake-up for the events of several fast-lane requests instead of one each
    (`control_plane/scheduler/pacing.py`); 0 reads each batch at once."""
    checkpoint_interval_s: float = Field(default=1.0, gt=0)
    scheduler_port: int = Field(default=9090, ge=0, le=65535)

    recorder_batch: int = Field(default=200, ge=1)
    recorder_interval_s: float = Field(default=0.25, gt=0)
    recorder_min_gap_s: float = Field(default=0.1, ge=0.0, le=10.0)
    """After a batch that was not full, the recorder waits until this long after its previous
    read began: under load one SQL transaction per gap instead of one per few events (rows
    land up to this much later); 0 writes each read at once."""
    recorder_nice: int = Field(default=10, ge=0, le=19)
    """`arbiter recorder` raises its own nice value by this much at start (and its session's,
    where it leads one, as under `arbiter up`: with autogroups, sessions share the CPU
    equally whatever their processes' nice values), so that on cores it shares with gateways
    and schedulers its SQL batches yield to the request path. Measured on two cores
    (docs/performance.md, "The recorder at a lower priority"): c=1's added p99 about 0.4 ms
    lower in 4 of 6 pairs, its median about 0.1 ms higher, 2–6 % more requests/s at c=128.
    On a CPU saturated for long a niced recorder falls behind (rows land later, the events
    stream grows until it catches up); 0 leaves it as started. A recorder inside the
    scheduler process is never niced."""
    recorder_claim_idle_s: float = Field(default=30.0, gt=0)
    """Events a dead recorder read but never acknowledged are taken over after this idle time
    (checked every third of it)."""
    recorder_metrics_port: int = Field(default=0, ge=0, le=65535)
    """`arbiter recorder` serves its Prometheus metrics (rows written, dead letters) on this
    port; 0 serves none."""
    recorder_name: str = ""
    """Stable consumer name of this recorder replica (unique per replica): a restarted recorder
    with the same name replays its own unacknowledged events at once instead of waiting
    `recorder_claim_idle_s` for them. Empty: host and pid (a fresh name each start)."""

    directory_cache_entries: int = Field(default=10_000, ge=1)
    """Size cap of each of the gateway's key/tenant/hierarchy caches (LRU beyond it)."""
    auth_failures_per_ip: tuple[_Rate, _Burst] = (1.0, 20)
    """Failed authentications one client IP may make, `[per_second, burst]` (JSON in the env);
    beyond them keys the gateway has not seen valid get 429 (rate 0 disables)."""
    auth_failures_global: tuple[_Rate, _Burst] = (50.0, 500)
    """The same limit for all clients of one gateway replica together (rate 0 disables)."""
    metrics_token: str = Field(default="", repr=False)
    """Bearer token `/metrics` requires; empty leaves it open."""
    metrics_tenant_labels: Literal["auto", "name", "hash", "none"] = "auto"
    """Tenant label on `/metrics`: `auto` is `name` with a metrics token, else `hash`."""

    log_level: str = "INFO"
    """A name Python's `logging` knows, in any case (`DEBUG`, `INFO`, `WARNING`, `ERROR`,
    `CRITICAL`; also `WARN`, `FATAL`, `NOTSET`)."""

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, level: str) -> str:
        if level.upper() not in _LOG_LEVELS:
            raise ValueError(f"expected one of {', '.join(_LOG_LEVELS)}, got {level!r}")
        return level.upper()

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: str) -> str:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"expected redis://host:port/db, rediss://… or unix://…, got {url!r}")
        return url

    @field_validator("redis_sentinels")
    @classmethod
    def _sentinel_list(cls, sentinels: str) -> str:
        for item in filter(None, (s.strip() for s in sentinels.split(","))):
            host, colon, port = item.rpartition(":")
            if not (colon and host and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(f"{item!r}: expected host:port[,host:port…] (e.g. 10.0.0.5:26379)")
        return sentinels

    @field_validator("redis_sentinel_service")
    @classmethod
    def _sentinel_service(cls, service: str) -> str:
        if not service.strip() or any(c.isspace() for c in service):
            raise ValueError(f"expected the Sentinel monitor name (no spaces), got {service!r}")
        return service

    @field_validator("database_url")
    @classmethod
    def _database_scheme(cls, url: str) -> str:
        if (problem := database_url_problem(url)) is not None:
            raise ValueError(problem)
        return url

    @field_validator("workers")
    @classmethod
    def _worker_list(cls, workers: str) -> str:
        for item in filter(None, (w.strip() for w in workers.split(","))):
            url, bar, seqs = item.partition("|")
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{item!r}: expected http(s)://host:port[|max_num_seqs]")
            if bar and not (seqs.isdigit() and int(seqs) > 0):
                raise ValueError(f"{item!r}: max_num_seqs after '|' must be a positive integer")
        return workers

    @model_validator(mode="after")
    def _liveness_margin(self) -> Settings:
        if self.gateway_dead_after_s < 3 * self.gateway_heartbeat_s:
            raise ValueError("gateway_dead_after_s must be at least 3 × gateway_heartbeat_s")
        return self

    def no_leader_bound_s(self) -> float:
        """How long requests may wait while no leader leads (`no_leader_503_after_s`)."""
        return self.no_leader_503_after_s or 5 * self.lease_ttl_s

    def static_workers(self) -> list[WorkerEntry]:
        """Registry entries for `workers` (id = host:port)."""
        out: list[WorkerEntry] = []
        for item in filter(None, (w.strip() for w in self.workers.split(","))):
            url, _, seqs = item.partition("|")
            url = url.rstrip("/")
            worker_id = url.split("://", 1)[-1]
            max_num_seqs = int(seqs) if seqs.isdigit() else None
            entry = WorkerEntry(
                worker_id, url, kind="vllm", max_num_seqs=max_num_seqs, origin=CONFIG
            )
            out.append(entry)
        return out


class SettingsError(ValueError):
    """Settings that cannot be used; `lines` name each variable (or flag) and what is wrong."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines


def database_url_problem(url: str) -> str | None:
    """What is wrong with `url` as `ARBITER_DATABASE_URL` (None: nothing): for the commands
    that take `--database-url` alone, without the other settings."""
    if not url.startswith(("sqlite://", "postgresql://", "postgresql+")):
        return f"expected sqlite:///path.db or postgresql+psycopg://user@host/db, got {url!r}"
    if (problem := url_problem(url)) is not None:  # the URL may hold a password: not shown
        return f"not a database URL SQLAlchemy can read: {problem}"
    return None


def database_url_of(flag: str | None) -> str:
    """`--database-url` checked alone when given (for commands that need no other setting, so
    an unrelated bad variable does not stop them), else `ARBITER_DATABASE_URL` with the other
    settings; `SettingsError` naming whichever is wrong."""
    if flag is None:
        return load_settings().database_url
    if (problem := database_url_problem(flag)) is not None:
        raise SettingsError([f"--database-url: {problem}"])
    return flag


def load_settings(**overrides: Any) -> Settings:
    """`Settings` from the environment with `overrides` (command-line flags) on top.

    Raises `SettingsError` with one line per problem, named as the operator set it:
    `ARBITER_LEASE_TTL_S: Input should be a valid number (got 'abc')`, or `--port` for a flag.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise SettingsError([_line(error, given) for error in exc.errors()]) from None


def _line(error: Any, flags: dict[str, Any]) -> str:
    field = str(error["loc"][0]) if error["loc"] else ""
    if not field:
        where = "settings"
    elif field in flags:
        where = "--" + field.replace("_", "-")
    else:
        where = "ARBITER_" + field.upper()
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] != "value_error" and "input" in error and field:
        message += f" (got {error['input']!r})"
    return f"{where}: {message}"
