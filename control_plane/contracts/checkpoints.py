"""What the leader checkpoints to Redis: its state for a successor, and the live view.

Wire format: the previous release's (one JSON document per checkpoint name, `ledger` and
`live`), with one optional field added to `ledger`: `events_applied_to` (absent: `0-0`). The
parts a plug-in defines (the ledger's and the dispatcher's snapshots, a policy's or
admission's own view) stay JSON: their owner reads them back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from control_plane.contracts.fields import ContractError, Fields
from control_plane.contracts.knobs import JsonValue

NO_EVENT = "0-0"
"""Before every stream id Redis generates (a checkpoint that reflects no event yet)."""
STREAM_ID = re.compile(r"[0-9]+-[0-9]+")


class CheckpointError(ContractError):
    """A checkpoint that does not decode; the message names the field."""


@dataclass(frozen=True, slots=True)
class LeaderState:
    """The `ledger` checkpoint: what a new leader restores (ledger, plug-in state, and the
    output tokens already charged for each running request)."""

    ledger: Mapping[str, JsonValue] | None = None
    dispatcher: JsonValue = None
    running_n_out: Mapping[str, int] = field(default_factory=dict)
    controller: JsonValue = None
    """The meta-controller's params and state when the policy is `auto` (else None)."""
    events_applied_to: str = NO_EVENT
    """The id of the last `events` entry the checkpointed state reflects: a successor that
    claims its predecessor's unacknowledged events finds the ones up to here charged already."""

    def to_json(self) -> dict[str, Any]:
        return {
            "ledger": None if self.ledger is None else dict(self.ledger),
            "dispatcher": self.dispatcher,
            "running_n_out": dict(self.running_n_out),
            "controller": self.controller,
            "events_applied_to": self.events_applied_to,
        }


def decode_leader_state(data: object) -> LeaderState:
    f = _fields(data, "ledger checkpoint")
    n_out = f.inner("running_n_out")
    ledger = f.data.get("ledger")
    if ledger is not None and not isinstance(ledger, Mapping):
        raise CheckpointError(f"ledger: expected an object, got {type(ledger).__name__}")
    return LeaderState(
        ledger=None if ledger is None else dict(ledger),
        dispatcher=f.data.get("dispatcher"),
        running_n_out={str(k): n_out.integer(str(k), 0) for k in n_out.data},
        controller=f.data.get("controller"),
        events_applied_to=_stream_id(f.text("events_applied_to", NO_EVENT)),
    )


def _stream_id(value: str) -> str:
    if not STREAM_ID.fullmatch(value):
        raise CheckpointError(f"events_applied_to: expected a stream id `ms-seq`, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class PolicyState:
    """The policy the leader runs: name, validated params and its own snapshot."""

    name: str
    params: Mapping[str, JsonValue] = field(default_factory=dict)
    snapshot: JsonValue = None


@dataclass(frozen=True, slots=True)
class NodeCount:
    """One node (tenant, tenant/app or tenant/app/agent) now and over the live window: queued
    and in-flight requests, demand against what it received and was entitled to (Unified
    Tokens per second), queue waits, and its status under `core.entitlement.STATUS_RULE`.

    Shares are of what the node's siblings received together (None while they received
    nothing); `wait_p95_s` is None while nothing of the node was dispatched in the window.
    """

    path: tuple[str, ...]
    queued: int = 0
    inflight: int = 0
    weight: float = 1.0
    demand_rate: float = 0.0
    service_rate: float = 0.0
    entitled_rate: float = 0.0
    entitled_share: float | None = None
    received_share: float | None = None
    wait_p95_s: float | None = None
    oldest_wait_s: float = 0.0
    backlogged: bool = False
    status: str = "ok"


@dataclass(frozen=True, slots=True)
class WorkerLive:
    """One worker as the leader sees it: registry status, scraped load, its own in-flight."""

    id: str
    url: str = ""
    model: str = ""
    healthy: bool = False
    draining: bool = False
    status: str = "active"
    inflight: int = 0
    max_num_seqs: int = 0
    kv_tokens: int = 0
    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    preemptions: int = 0
    scraped_at: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LiveView:
    """The `live` checkpoint: the leader's view for the admin API and the console."""

    leader: str
    updated_at: float
    policy: PolicyState
    admission: JsonValue = None
    placement: JsonValue = None
    queue_depth: int = 0
    inflight: int = 0
    tenants: Mapping[str, Mapping[str, JsonValue]] = field(default_factory=dict)
    nodes: Sequence[NodeCount] = ()
    weights: Mapping[str, float] = field(default_factory=dict)
    workers: Sequence[WorkerLive] = ()
    controller: JsonValue = None
    """The meta-controller when the policy is `auto` (selector, pool, current policy, last
    `V_long`, latest switches); None when a policy is pinned."""
    workflows: JsonValue = None
    """What the workflow orchestrator learned, per application (`Orchestrator.learned`)."""
    window_s: float = 60.0
    """The window of the nodes' rates, waits and status."""
    tolerance: float = 0.2
    wait_threshold_s: float = 2.0
    """A node is backlogged when a request of it waited (or waits) longer than this."""
    knob_errors: Mapping[str, str] = field(default_factory=dict)
    """Knob name → why the leader could not apply its value (it kept what it had, or took
    the default): a plug-in module its host lacks, params this build refuses, a plug-in that
    raised when built."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["nodes"] = [{**asdict(n), "path": list(n.path)} for n in self.nodes]
        return out


def decode_live_view(data: object) -> LiveView:
    """The live view of a stored document; raises `CheckpointError` naming the field."""
    f = _fields(data, "live view")
    policy = f.inner("policy")
    tenants = f.data.get("tenants") or {}
    if not isinstance(tenants, Mapping):
        raise CheckpointError(f"tenants: expected an object, got {type(tenants).__name__}")
    return LiveView(
        leader=f.text("leader", ""),
        updated_at=f.number("updated_at", 0.0),
        policy=PolicyState(
            policy.text("name", ""),
            dict(policy.inner("params").data),
            policy.data.get("snapshot"),
        ),
        admission=f.data.get("admission"),
        placement=f.data.get("placement"),
        queue_depth=f.integer("queue_depth", 0),
        inflight=f.integer("inflight", 0),
        tenants={str(k): dict(v) for k, v in tenants.items() if isinstance(v, Mapping)},
        nodes=tuple(_node(n) for n in _list(f, "nodes")),
        weights={str(k): f.inner("weights").number(str(k), 0.0) for k in f.inner("weights").data},
        workers=tuple(_worker(w) for w in _list(f, "workers")),
        controller=f.data.get("controller"),
        workflows=f.data.get("workflows"),
        window_s=f.number("window_s", 60.0),
        tolerance=f.number("tolerance", 0.2),
        wait_threshold_s=f.number("wait_threshold_s", 2.0),
        knob_errors={str(k): str(v) for k, v in f.inner("knob_errors").data.items()},
    )


def _fields(data: object, what: str) -> Fields:
    if not isinstance(data, Mapping):
        raise CheckpointError(f"{what}: expected an object, got {type(data).__name__}")
    return Fields(data, CheckpointError)


def _list(f: Fields, name: str) -> list[Fields]:
    raw = f.data.get(name) or []
    if not isinstance(raw, list):
        raise CheckpointError(f"{name}: expected a list, got {type(raw).__name__}")
    return [_fields(item, f"{name}[{i}]") for i, item in enumerate(raw)]


def _node(f: Fields) -> NodeCount:
    path = f.data.get("path")
    if not isinstance(path, list) or not all(isinstance(p, str) for p in path):
        raise CheckpointError("nodes.path: expected a list of names")
    return NodeCount(
        tuple(path),
        f.integer("queued", 0),
        f.integer("inflight", 0),
        weight=f.number("weight", 1.0),
        demand_rate=f.number("demand_rate", 0.0),
        service_rate=f.number("service_rate", 0.0),
        entitled_rate=f.number("entitled_rate", 0.0),
        entitled_share=f.number("entitled_share"),
        received_share=f.number("received_share"),
        wait_p95_s=f.number("wait_p95_s"),
        oldest_wait_s=f.number("oldest_wait_s", 0.0),
        backlogged=f.flag("backlogged"),
        status=f.text("status", "ok"),
    )


def _worker(f: Fields) -> WorkerLive:
    return WorkerLive(
        id=f.text("id", required=True),
        url=f.text("url", ""),
        model=f.text("model", ""),
        healthy=f.flag("healthy"),
        draining=f.flag("draining"),
        status=f.text("status", "active"),
        inflight=f.integer("inflight", 0),
        max_num_seqs=f.integer("max_num_seqs", 0),
        kv_tokens=f.integer("kv_tokens", 0),
        running=f.integer("running", 0),
        waiting=f.integer("waiting", 0),
        kv_usage=f.number("kv_usage", 0.0),
        preemptions=f.integer("preemptions", 0),
        scraped_at=f.number("scraped_at"),
        error=f.text("error"),
    )
