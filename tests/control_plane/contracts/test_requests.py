"""Envelope and request-record codecs: lossless both ways, every refusal names its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control_plane.contracts.requests import (
    Envelope,
    RecordError,
    decode_envelope,
    decode_record,
    encode_envelope,
)
from control_plane.core.job import Job, Slo


def _job(**overrides: Any) -> Job:
    fields: dict[str, Any] = {
        "id": "r1",
        "tenant": "acme",
        "arrival": 12.5,
        "n_in": 40,
        "max_tokens": 256,
        "app": "chat",
        "agent": "router",
        "model": "m",
        "workflow": "wf-1",
        "upstream": "r0",
        "task": "math",
        "tier": 2,
        "slo": Slo(ttft_s=0.5, e2e_s=4.0),
        "unit_factor": 1.5,
        **overrides,
    }
    return Job(**fields)


def test_an_envelope_survives_the_wire_unchanged() -> None:
    envelope = Envelope(_job(), {"tenant": 2.0, "app": 1.0, "agent": 0.5}, "gw-1")
    wire = json.loads(json.dumps(encode_envelope(envelope)))
    assert set(wire) == {"job", "weights", "gateway"}
    assert decode_envelope(wire) == envelope


def test_the_job_on_the_wire_carries_no_true_output_length() -> None:
    """The scheduler may see `max_tokens` and a prediction, never what the worker will emit."""
    wire = encode_envelope(Envelope(_job(), {}, "gw"))["job"]
    assert not {"n_out_true", "true_out", "output_len", "min_tokens"} & set(wire)
    assert wire["n_out"] == 0  # what was produced so far: nothing, at submit


@pytest.mark.parametrize(
    "data,message",
    [
        ([1], "envelope: expected an object, got list"),
        ({}, "envelope.job.id: required"),
        ({"job": "x"}, "envelope.job: expected an object, got str"),
        ({"job": {"id": "r", "tenant": "a", "arrival": 1, "n_in": "ten"}}, "envelope.job.n_in: "),
        ({"job": {"id": "r", "tenant": 7}}, "envelope.job.tenant: expected a string, got int"),
        ({"job": {"id": "r", "tenant": "a", "arrival": float("inf")}}, "envelope.job.arrival: "),
        ({"job": _job().to_json(), "weights": {"tenant": "heavy"}}, "envelope.weights.tenant: "),
        ({"job": _job().to_json() | {"slo": {"ttft_s": "1"}}}, "envelope.job.slo.ttft_s: "),
    ],
)
def test_a_bad_envelope_is_refused_naming_the_field(data: object, message: str) -> None:
    with pytest.raises(RecordError, match="^" + message):
        decode_envelope(data)


def test_a_request_hash_decodes_to_its_typed_record() -> None:
    envelope = Envelope(_job(), {"tenant": 1.0}, "gw-1")
    fields = {
        "id": "r1",
        "envelope": json.dumps(encode_envelope(envelope)),
        "status": "granted",
        "tenant": "acme",
        "gateway": "gw-1",
        "seq": "17",
        "attempts": "2",
        "submitted_at": "100.25",
        "granted_at": "101.5",
        "worker": "w1",
        "worker_url": "http://w1",
        "prev_worker": "w0",
        "recorded": "1",
        "something_new": "ignored",
    }
    record = decode_record("r1", fields)
    assert record is not None and record.decode_errors == ()
    assert (record.status, record.seq, record.attempts) == ("granted", 17, 2)
    assert (record.submitted_at, record.granted_at, record.finished_at) == (100.25, 101.5, None)
    assert (record.worker, record.prev_worker, record.recorded) == ("w1", "w0", True)
    job, weights = record.job()
    assert job.seq == 17 and weights == {"tenant": 1.0}
    assert job == _job(seq=17)
    assert record.envelope is not None and record.envelope.job.seq == 0  # a copy was changed
    assert json.loads(json.dumps(record.to_json()))["envelope"]["gateway"] == "gw-1"


def test_a_corrupt_hash_never_raises_and_its_job_is_refused() -> None:
    assert decode_record("gone", {}) is None
    record = decode_record("r9", {"status": "queued", "envelope": "{", "seq": "x"})
    assert record is not None and record.id == "r9"
    assert [e.split(":")[0] for e in record.decode_errors] == ["envelope", "seq"]
    with pytest.raises(RecordError, match="no valid envelope"):
        record.job()
    good = json.dumps(encode_envelope(Envelope(_job(), {}, "g")))
    with pytest.raises(RecordError, match="arrival order"):
        decode_record("r1", {"envelope": good, "seq": "x"}).job()  # type: ignore[union-attr]
