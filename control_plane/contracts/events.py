"""The events stream's messages: typed, frozen, with one codec each way.

Wire format (one JSON object per stream entry, `"type"` first): unchanged from the dict events
of the previous release, so gateways, schedulers and recorders of both releases interoperate
and `withdraw.lua` can keep writing its own entries. Decoding ignores fields it does not know
(a newer sender may add one) and refuses, with `EventError` naming the field, a known field
of the wrong type or a missing required one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from control_plane.contracts.fields import ContractError, Fields
from control_plane.contracts.requests import Envelope, decode_envelope, encode_envelope
from control_plane.core.job import Job, Outcome, Slo

LOST_COMPLETION: Final = "completion lost: slot freed by the leader's in-flight audit"
"""The `error` of the `complete` event the leader's in-flight audit publishes for a request
whose completion never reached it (`scheduler/slot_audit.py`): its row is provisional, and the
recorder replaces it with the request's real completion should that be recorded later."""


class EventError(ContractError):
    """An entry that is not a valid event; the message names the field."""


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent a request and what it asked for (every `complete` event of a known job)."""

    tenant: str
    app: str = "default"
    agent: str = "default"
    model: str = "default"
    workflow: str | None = None
    upstream: str | None = None
    task: str | None = None
    tier: int = 0
    slo: Slo = field(default_factory=Slo)
    unit_factor: float = 1.0

    @classmethod
    def of(cls, job: Job) -> Sender:
        return cls(
            job.tenant,
            job.app,
            job.agent,
            job.model,
            job.workflow,
            job.upstream,
            job.task,
            job.tier,
            job.slo,
            job.unit_factor,
        )


@dataclass(frozen=True, slots=True)
class Progress:
    """A streaming request has produced `n_out` output tokens in total by `t` (cumulative)."""

    id: str
    n_out: int
    t: float


@dataclass(frozen=True, slots=True)
class Complete:
    """A request ended (any status): what the scheduler releases and the recorder writes.

    Times are epoch seconds; `sender` is None only for entries that describe no request of a
    known job (an orphan grant released by a gateway).
    """

    id: str
    status: str
    finished: float
    n_in: int = 0
    n_out: int = 0
    error: str | None = None
    sender: Sender | None = None
    arrival: float | None = None
    dispatched: float | None = None
    first_token: float | None = None
    n_in_est: int | None = None
    worker: str | None = None
    attempts: int = 0
    finish_reason: str | None = None
    orphan: bool = False
    gateway_lost: str | None = None
    """Set when the scheduler released the request because its gateway was lost."""
    policy: str | None = None
    images: int | None = None
    """Images generated (image models: `n_out` counts images × denoising steps)."""

    def outcome(self) -> Outcome:
        """Status, token counts and latencies (seconds) from the event's timestamps."""
        arrival, first, finished, n_out = self.arrival, self.first_token, self.finished, self.n_out
        ttft = _ms(first, arrival)
        e2e = _ms(finished, arrival)
        tpot = _ms(finished, first)
        queue = _ms(self.dispatched, arrival)
        return Outcome(
            status=self.status,
            n_in=self.n_in,
            n_out=n_out,
            ttft_s=None if ttft is None else ttft / 1000.0,
            tpot_s=None if tpot is None or n_out < 2 else tpot / 1000.0 / (n_out - 1),
            e2e_s=None if e2e is None else e2e / 1000.0,
            queue_s=None if queue is None else queue / 1000.0,
        )


def _ms(later: float | None, earlier: float | None) -> float | None:
    if later is None or earlier is None:
        return None
    return max(0.0, (later - earlier) * 1000.0)


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """A queued request left the queue unserved (client gone, queue timeout, no leader).

    `attempts` is the request hash's count (1 = the first; more once a worker failure
    re-queued it). `envelope` is what its gateway submitted (the recorder writes its row from
    it); None for an entry of a build that did not send it, or one whose envelope did not
    decode — `envelope_error` then says why and `envelope_raw` keeps it as it came (encoded
    back as it was, so a dead letter holds what the row would be rebuilt from), and the entry
    is still valid: the leader needs only `id`.
    """

    id: str
    reason: str = ""
    tenant: str | None = None
    seq: int | None = None
    at: float | None = None
    attempts: int = 0
    envelope: Envelope | None = None
    envelope_error: str | None = None
    envelope_raw: object = None


@dataclass(frozen=True, slots=True)
class WorkerFailed:
    """A worker failed a request (before its first token, or mid-stream)."""

    id: str
    worker: str | None
    reason: str
    t: float


@dataclass(frozen=True, slots=True)
class PolicySwitched:
    """The leader's meta-controller switched the ordering policy (an audit row to write).

    `view` is the `V_long` it decided on, as a JSON text; `id` names the switch uniquely.
    """

    id: str
    t: float
    old: str
    new: str
    reason: str
    selector: str
    view: str = "{}"


@dataclass(frozen=True, slots=True)
class Audited:
    """A change the leader made on its own, not through the admin API (a worker its settings
    no longer list drained, say): an audit row for the recorder to write, as the admin API
    writes its own. `old` and `new` are JSON texts; `id` names the change uniquely."""

    id: str
    t: float
    actor: str
    action: str
    target: str
    old: str = "null"
    new: str = "null"
    reason: str = ""


Event = Progress | Complete | Withdrawn | WorkerFailed | PolicySwitched | Audited
TYPES: dict[type[Any], str] = {
    Progress: "progress",
    Complete: "complete",
    Withdrawn: "withdrawn",
    WorkerFailed: "worker_failed",
    PolicySwitched: "policy_switched",
    Audited: "audited",
}


# -- encoding -----------------------------------------------------------------------------
def encode(event: Event) -> dict[str, Any]:
    """The event as the JSON object the stream carries."""
    out: dict[str, Any] = {"type": TYPES[type(event)]}
    if isinstance(event, Complete):
        out.update(_complete_fields(event))
        return out
    for name in event.__dataclass_fields__:
        out[name] = getattr(event, name)
    if isinstance(event, Withdrawn):
        raw = out.pop("envelope_raw")
        out["envelope"] = raw if event.envelope is None else encode_envelope(event.envelope)
    return out


def _complete_fields(e: Complete) -> dict[str, Any]:
    out: dict[str, Any] = {"id": e.id, "status": e.status, "error": e.error}
    if e.sender is not None:
        s = e.sender
        out.update(
            tenant=s.tenant,
            app=s.app,
            agent=s.agent,
            model=s.model,
            workflow=s.workflow,
            upstream=s.upstream,
            task=s.task,
            tier=s.tier,
            slo=s.slo.to_json(),
            unit_factor=s.unit_factor,
        )
    out.update(
        arrival=e.arrival,
        dispatched=e.dispatched,
        first_token=e.first_token,
        finished=e.finished,
        n_in=e.n_in,
        n_in_est=e.n_in_est,
        n_out=e.n_out,
        worker=e.worker,
        attempts=e.attempts,
        finish_reason=e.finish_reason,
    )
    for name in ("orphan", "gateway_lost", "policy", "images"):
        value = getattr(e, name)
        if value:
            out[name] = value
    return out


# -- decoding -----------------------------------------------------------------------------
def decode(data: Mapping[str, Any]) -> Event:
    """The typed event of a stream entry's JSON object; raises `EventError`."""
    kind = data.get("type")
    reader = _READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        raise EventError(f"type: unknown event type {kind!r}")
    return reader(Fields(data, EventError))


def _progress(f: Fields) -> Progress:
    return Progress(f.text("id", required=True), f.integer("n_out", 0), f.number("t", 0.0))


def _sender(f: Fields) -> Sender | None:
    tenant = f.text("tenant")
    if tenant is None:
        return None
    return Sender(
        tenant=tenant,
        app=f.text("app", "default"),
        agent=f.text("agent", "default"),
        model=f.text("model", "default"),
        workflow=f.text("workflow"),
        upstream=f.text("upstream"),
        task=f.text("task"),
        tier=f.integer("tier", 0),
        slo=f.slo(),
        unit_factor=f.number("unit_factor", 1.0),
    )


def _complete(f: Fields) -> Complete:
    return Complete(
        id=f.text("id", required=True),
        status=f.text("status", "error"),
        finished=f.number("finished", required=True),
        n_in=f.integer("n_in", 0),
        n_out=f.integer("n_out", 0),
        error=f.text("error"),
        sender=_sender(f),
        arrival=f.number("arrival"),
        dispatched=f.number("dispatched"),
        first_token=f.number("first_token"),
        n_in_est=f.integer("n_in_est"),
        worker=f.text("worker"),
        attempts=f.integer("attempts", 0),
        finish_reason=f.text("finish_reason"),
        orphan=f.flag("orphan"),
        gateway_lost=f.text("gateway_lost") or None,
        policy=f.text("policy"),
        images=f.integer("images"),
    )


def _withdrawn(f: Fields) -> Withdrawn:
    envelope, problem, kept = None, None, None
    if (raw := f.data.get("envelope")) is not None:
        try:
            envelope = decode_envelope(raw)
        except (ValueError, TypeError) as exc:  # the row is lost, not the withdrawal (leader: id)
            problem, kept = str(exc), raw
    return Withdrawn(
        id=f.text("id", required=True),
        reason=f.text("reason", ""),
        tenant=f.text("tenant"),
        seq=f.integer("seq"),
        at=f.number("at"),
        attempts=f.integer("attempts", 0),
        envelope=envelope,
        envelope_error=problem,
        envelope_raw=kept,
    )


def _worker_failed(f: Fields) -> WorkerFailed:
    return WorkerFailed(
        id=f.text("id", required=True),
        worker=f.text("worker"),
        reason=f.text("reason", ""),
        t=f.number("t", 0.0),
    )


def _policy_switched(f: Fields) -> PolicySwitched:
    return PolicySwitched(
        id=f.text("id", required=True),
        t=f.number("t", 0.0),
        old=f.text("old", ""),
        new=f.text("new", required=True),
        reason=f.text("reason", ""),
        selector=f.text("selector", ""),
        view=f.text("view", "{}"),
    )


def _audited(f: Fields) -> Audited:
    reason: str = f.text("reason", "")
    if not reason.strip():
        raise EventError("reason: an audited change needs one (the audit log refuses it)")
    return Audited(
        id=f.text("id", required=True),
        t=f.number("t", required=True),
        actor=f.text("actor", required=True),
        action=f.text("action", required=True),
        target=f.text("target", ""),
        old=_json_text(f, "old"),
        new=_json_text(f, "new"),
        reason=reason,
    )


def _json_text(f: Fields, name: str) -> str:
    text: str = f.text(name, "null")
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser's recursion limit
        raise EventError(f"{name}: not a JSON text: {text[:80]!r}") from None
    return text


_READERS: dict[str, Callable[[Fields], Event]] = {
    "progress": _progress,
    "complete": _complete,
    "withdrawn": _withdrawn,
    "worker_failed": _worker_failed,
    "policy_switched": _policy_switched,
    "audited": _audited,
}
