"""A worker as it crosses processes: its registry entry and its latest scrape.

Wire format: the previous release's plus an optional `origin` field (readers ignore fields
they do not know). A registry entry is one Redis hash whose field values are JSON (`"url":
"\\"http://w1\\""`, `"max_num_seqs": "64"`); a scrape is one JSON object per worker in the
metrics hash, stamped with `at`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

import orjson

from control_plane.contracts.fields import ContractError, Fields

WORKER_STATUSES: Final = frozenset({"active", "draining", "unhealthy"})
CONFIG: Final = "config"
"""`origin` of an entry a scheduler's `ARBITER_WORKERS` registered."""
CONFIG_REMOVED: Final = "config-removed"
"""`origin` of a `config` entry the leader drained because its settings no longer list it."""
ADMIN: Final = "admin"
"""`origin` of an entry registered through the admin API."""


class WorkerError(ContractError):
    """A worker entry or scrape that does not decode; the message names the field."""


@dataclass(frozen=True, slots=True)
class WorkerEntry:
    """One worker in the Redis registry: where it is, what it serves, how much it takes.

    Rule: `None` means "not set" — writing an entry sets only the fields it holds and leaves
    the others (an operator's drain survives a re-registration). A new entry starts `active`.
    """

    id: str
    url: str | None = None
    status: str | None = None
    model: str | None = None
    kind: str | None = None
    profile: str | None = None
    max_num_seqs: int | None = None
    kv_tokens: int | None = None
    origin: str | None = None
    """Who registered it (`CONFIG`, `CONFIG_REMOVED`, `ADMIN`); None: a worker's own
    registration, `arbiter up`, or an entry older than the field. Only `CONFIG` entries are
    reconciled with the settings (`scheduler/configured.py`)."""

    def __post_init__(self) -> None:
        if not self.id:
            raise WorkerError("id: a worker entry needs a non-empty id")
        if self.status is not None and self.status not in WORKER_STATUSES:
            raise WorkerError(f"status: must be one of {sorted(WORKER_STATUSES)}")

    @property
    def active(self) -> bool:
        return (self.status or "active") == "active"

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as one JSON object (the admin API shows this)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def encode_entry(entry: WorkerEntry) -> dict[str, str]:
    """The hash fields to write: each set field's value as JSON text."""
    return {k: orjson.dumps(v).decode() for k, v in entry.to_json().items()}


def decode_entry(worker_id: str, raw: Mapping[str, str]) -> WorkerEntry | None:
    """The entry of a registry hash (None when empty); raises `WorkerError` naming the field."""
    if not raw:
        return None
    data: dict[str, Any] = {}
    for name, text in raw.items():
        try:
            data[name] = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise WorkerError(f"{name}: not JSON: {text[:40]!r}") from None
    f = Fields(data, WorkerError)
    return WorkerEntry(
        id=f.text("id", worker_id),
        url=f.text("url"),
        status=f.text("status"),
        model=f.text("model"),
        kind=f.text("kind"),
        profile=f.text("profile"),
        max_num_seqs=f.integer("max_num_seqs"),
        kv_tokens=f.integer("kv_tokens"),
        origin=f.text("origin"),
    )


@dataclass(slots=True)
class WorkerSample:
    """One scrape of one worker; `healthy` is False when any endpoint failed."""

    healthy: bool
    scraped_at: float
    running: float = 0.0
    waiting: float = 0.0
    kv_usage: float = 0.0
    preemptions_total: float = 0.0
    kv_tokens: int | None = None
    models: dict[str, int | None] | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def decode_sample(data: object) -> WorkerSample:
    """The scrape of a stored metrics object; raises `WorkerError` naming the field."""
    if not isinstance(data, Mapping):
        raise WorkerError(f"metrics: expected an object, got {type(data).__name__}")
    f = Fields(data, WorkerError)
    models = data.get("models")
    if models is not None and not isinstance(models, Mapping):
        raise WorkerError(f"models: expected an object, got {type(models).__name__}")
    inner = Fields(models or {}, WorkerError, "models.")
    return WorkerSample(
        healthy=f.flag("healthy"),
        scraped_at=f.number("scraped_at", f.number("at", 0.0)),
        running=f.number("running", 0.0),
        waiting=f.number("waiting", 0.0),
        kv_usage=f.number("kv_usage", 0.0),
        preemptions_total=f.number("preemptions_total", 0.0),
        kv_tokens=f.integer("kv_tokens"),
        models=None if models is None else {str(k): inner.integer(str(k)) for k in models},
        error=f.text("error"),
    )
