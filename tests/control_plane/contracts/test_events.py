"""The events' codec: every type round-trips, the wire shape is the previous release's, and a
bad entry is refused with the field named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control_plane.contracts.events import (
    Complete,
    Event,
    EventError,
    PolicySwitched,
    Progress,
    Sender,
    Withdrawn,
    WorkerFailed,
    decode,
    encode,
)
from control_plane.core.job import Job, Slo
from tests.support.envelopes import envelope

JOB = Job(
    id="r1",
    tenant="acme",
    arrival=100.0,
    n_in=12,
    max_tokens=64,
    app="tutor",
    agent="math",
    model="m",
    workflow="wf-1",
    upstream="r0",
    task="solve",
    tier=2,
    slo=Slo(ttft_s=0.5, e2e_s=4.0),
    unit_factor=0.25,
)
EVENTS: list[Event] = [
    Progress("r1", 7, 101.5),
    Complete(
        "r1",
        "ok",
        finished=103.0,
        n_in=12,
        n_out=30,
        sender=Sender.of(JOB),
        arrival=100.0,
        dispatched=100.2,
        first_token=100.6,
        n_in_est=11,
        worker="w1",
        attempts=1,
        finish_reason="stop",
    ),
    Complete("r2", "aborted", finished=5.0, error="client gone before grant", orphan=True),
    Complete("r3", "withdrawn", finished=6.0, gateway_lost="gw-2", sender=Sender("acme")),
    Complete("r6", "ok", finished=9.0, n_in=20, n_out=56, sender=Sender("art"), images=2),
    Withdrawn("r4", "queue_timeout", tenant="acme", seq=9, at=7.0),
    Withdrawn("r7", "client_disconnected", "acme", 2, 7.5, 1, envelope("r7", "acme", arrival=7.0)),
    WorkerFailed("r5", "w2", "connection reset", 8.0),
    PolicySwitched("switch-9.0-edf", 9.0, "fcfs", "edf", "deadlines", "rules", '{"queued":3}'),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_survives_the_stream(event: Event) -> None:
    assert decode(json.loads(json.dumps(encode(event)))) == event


def test_the_complete_wire_shape_is_the_previous_releases() -> None:
    """Processes of the previous release read and write the same flat JSON object."""
    wire = encode(EVENTS[1])
    assert wire == {
        "type": "complete", "id": "r1", "status": "ok", "error": None,
        "tenant": "acme", "app": "tutor", "agent": "math", "model": "m", "workflow": "wf-1",
        "upstream": "r0", "task": "solve", "tier": 2,
        "slo": {"ttft_s": 0.5, "tpot_s": None, "e2e_s": 4.0}, "unit_factor": 0.25,
        "arrival": 100.0, "dispatched": 100.2, "first_token": 100.6, "finished": 103.0,
        "n_in": 12, "n_in_est": 11, "n_out": 30, "worker": "w1", "attempts": 1,
        "finish_reason": "stop",
    }  # fmt: skip
    assert encode(EVENTS[2])["orphan"] is True and "sender" not in encode(EVENTS[2])


def test_the_withdrawal_written_by_lua_decodes() -> None:
    raw = (
        '{"type":"withdrawn","id":"r9","tenant":"a","reason":"client_disconnected",'
        '"seq":3,"at":1.5}'
    )
    assert decode(json.loads(raw)) == Withdrawn("r9", "client_disconnected", "a", 3, 1.5)


def test_a_withdrawal_with_an_envelope_that_does_not_decode_still_withdraws() -> None:
    """The leader drops the job by its id whatever the envelope holds; only the recorder's
    row is lost (and the reason kept for its dead letter)."""
    raw = {"type": "withdrawn", "id": "r9", "reason": "queue_timeout", "envelope": {"job": 3}}
    event = decode(raw)
    assert isinstance(event, Withdrawn) and (event.id, event.envelope) == ("r9", None)
    assert event.envelope_error is not None and "envelope.job" in event.envelope_error
    # encoded back as it came, so the recorder's dead letter keeps what the row needs
    # (regression: the dead letter said `"envelope": null`)
    assert encode(event)["envelope"] == {"job": 3} and "envelope_raw" not in encode(event)


def test_unknown_fields_are_ignored_so_a_newer_sender_is_understood() -> None:
    assert decode({"type": "progress", "id": "r", "n_out": 2, "t": 1.0, "new": [1]}) == Progress(
        "r", 2, 1.0
    )


def test_outcome_latencies_come_from_the_timestamps() -> None:
    o = EVENTS[1]
    assert isinstance(o, Complete)
    out = o.outcome()
    assert (out.status, out.n_in, out.n_out) == ("ok", 12, 30)
    assert out.ttft_s == pytest.approx(0.6) and out.e2e_s == pytest.approx(3.0)
    assert out.queue_s == pytest.approx(0.2) and out.tpot_s == pytest.approx(2.4 / 29)
    assert Complete("x", "error", finished=1.0).outcome().ttft_s is None


@pytest.mark.parametrize(
    "entry,message",
    [
        ({"type": "done", "id": "r"}, "type: unknown event type 'done'"),
        ({"id": "r"}, "type: unknown event type None"),
        ({"type": "progress", "n_out": 1}, "id: required"),
        ({"type": "progress", "id": 7}, "id: expected a string, got int"),
        ({"type": "progress", "id": "r", "n_out": "lots"}, "n_out: expected an integer, got str"),
        ({"type": "progress", "id": "r", "n_out": 1.5}, "n_out: expected an integer, got 1.5"),
        ({"type": "progress", "id": "r", "n_out": True}, "n_out: expected an integer, got bool"),
        ({"type": "complete", "id": "r", "status": "ok"}, "finished: required"),
        ({"type": "complete", "id": "r", "finished": float("nan")}, "finished: expected a finite"),
        ({"type": "complete", "id": "r", "finished": float("-inf")}, "finished: expected a finite"),
        (
            {"type": "complete", "id": "r", "finished": 1, "tenant": "t", "tier": False},
            "tier: expected",
        ),
        ({"type": "complete", "id": "r", "finished": 1, "orphan": "yes"}, "orphan: expected true"),
        ({"type": "complete", "id": "r", "finished": 1, "tenant": "t", "slo": 3}, "slo: expected"),
        (
            {"type": "complete", "id": "r", "finished": 1, "tenant": "t", "slo": {"ttft_s": "x"}},
            "slo.ttft_s: expected a number",
        ),
    ],
)
def test_a_bad_entry_is_refused_naming_the_field(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(EventError, match="^" + message.replace("(", r"\(")):
        decode(entry)
