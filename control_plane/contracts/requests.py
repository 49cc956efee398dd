"""A request as it crosses processes: the gateway's `Envelope` and the stored `RequestRecord`.

Wire format: unchanged from the previous release. The envelope is one JSON object
`{"job": {...}, "weights": {...}, "gateway": "..."}` (the request hash's `envelope` field and
the `arrivals` stream entry); the request hash is flat text fields written by the state
package's Lua scripts (`seq`/`attempts` integers, `*_at` epoch seconds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from control_plane.contracts.fields import ContractError, Fields
from control_plane.core.job import Job

_TIMES: Final = ("submitted_at", "granted_at", "requeued_at", "finished_at")
_TEXTS: Final = ("tenant", "gateway", "worker", "worker_url", "prev_worker", "reason")


class RecordError(ContractError):
    """An envelope or request record that does not decode; the message names the field."""


@dataclass(frozen=True, slots=True)
class Envelope:
    """What a gateway submits for one request: the job as the scheduler will see it, the
    weights of its tenant → application → agent path, and the gateway replica that waits.

    Guarantee: `decode_envelope(encode_envelope(e)) == e` for every envelope a gateway builds;
    the job carries only what a live scheduler may see (no true output length).
    """

    job: Job
    weights: Mapping[str, float] = field(default_factory=dict)
    gateway: str = ""


def encode_envelope(envelope: Envelope) -> dict[str, Any]:
    """The envelope as the JSON object Redis stores."""
    return {
        "job": envelope.job.to_json(),
        "weights": dict(envelope.weights),
        "gateway": envelope.gateway,
    }


def decode_envelope(data: object) -> Envelope:
    """The envelope of a decoded JSON value; raises `RecordError` naming the field."""
    if not isinstance(data, Mapping):
        raise RecordError(f"envelope: expected an object, got {type(data).__name__}")
    f = Fields(data, RecordError, "envelope.")
    raw_weights = f.inner("weights")
    weights = {str(k): raw_weights.number(str(k), required=True) for k in raw_weights.data}
    return Envelope(_job(f.inner("job")), weights, f.text("gateway", ""))


def _job(f: Fields) -> Job:
    return Job(
        id=f.text("id", required=True),
        tenant=f.text("tenant", required=True),
        arrival=f.number("arrival", required=True),
        n_in=f.integer("n_in", required=True),
        max_tokens=f.integer("max_tokens", required=True),
        app=f.text("app", "default"),
        agent=f.text("agent", "default"),
        model=f.text("model", "default"),
        seq=f.integer("seq", 0),
        workflow=f.text("workflow"),
        upstream=f.text("upstream"),
        task=f.text("task"),
        tier=f.integer("tier", 0),
        slo=f.slo(),
        unit_factor=f.number("unit_factor", 1.0),
        predicted_out=f.integer("predicted_out"),
        workflow_start=f.number("workflow_start"),
        n_out=f.integer("n_out", 0),
        dispatched_at=f.number("dispatched_at"),
        worker=f.text("worker"),
        min_context=f.integer("min_context"),
    )


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request hash in Redis (`queued` → `granted` → an end status, or `withdrawn`).

    Decoding never raises: a field that does not decode is left at its default and named,
    with the reason, in `decode_errors`, so one corrupt hash cannot stop a rebuild or a sweep;
    `job()` then refuses with that reason.
    """

    id: str
    status: str = ""
    tenant: str = ""
    gateway: str = ""
    seq: int = 0
    attempts: int = 0
    envelope: Envelope | None = None
    submitted_at: float | None = None
    granted_at: float | None = None
    requeued_at: float | None = None
    finished_at: float | None = None
    worker: str = ""
    worker_url: str = ""
    prev_worker: str = ""
    reason: str = ""
    recorded: bool = False
    decode_errors: tuple[str, ...] = ()

    def job(self) -> tuple[Job, dict[str, float]]:
        """A fresh Job (with the store's `seq`) and the weights; raises `RecordError` when
        the record holds no usable envelope."""
        if self.envelope is None:
            why = f" ({'; '.join(self.decode_errors)})" if self.decode_errors else ""
            raise RecordError(f"no valid envelope{why}")
        if bad_seq := [e for e in self.decode_errors if e.startswith("seq:")]:
            raise RecordError(f"no valid arrival order ({bad_seq[0]})")
        job = dataclasses.replace(self.envelope.job, seq=self.seq or self.envelope.job.seq)
        return job, dict(self.envelope.weights)

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON object (the admin API and dead letters show this)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["envelope"] = None if self.envelope is None else encode_envelope(self.envelope)
        out["decode_errors"] = list(self.decode_errors)
        return out


def decode_record(request_id: str, fields: Mapping[str, str]) -> RequestRecord | None:
    """The record of a request hash's text fields (None for an empty hash: unknown id)."""
    if not fields:
        return None
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name, raw in fields.items():
        decode = _DECODERS.get(name)
        if decode is not None:
            try:
                values[name] = decode(raw)
            except (ValueError, TypeError) as exc:
                errors.append(str(exc) if isinstance(exc, ContractError) else f"{name}: {exc}")
    return RequestRecord(id=fields.get("id") or request_id, **values, decode_errors=tuple(errors))


def _envelope_text(raw: str) -> Envelope:
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    return decode_envelope(data)


def _time(raw: str) -> float:
    return float(raw)


_DECODERS: Final[dict[str, Any]] = {
    "status": str,
    "seq": int,
    "attempts": int,
    "envelope": _envelope_text,
    "recorded": lambda raw: raw == "1",
    **{name: _time for name in _TIMES},
    **{name: str for name in _TEXTS},
}
