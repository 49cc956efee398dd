"""Completion and withdrawal events become request rows with the right latencies, cost and
SLO outcome."""

from __future__ import annotations

import pytest

from control_plane.contracts.events import (
    Audited,
    Complete,
    EventError,
    PolicySwitched,
    Withdrawn,
    decode,
)
from control_plane.core.job import Slo
from control_plane.recorder.rows import audit_draft, request_row, withdrawal_row
from tests.support.envelopes import envelope


def _event(**over: object) -> Complete:
    base: dict[str, object] = {
        "type": "complete",
        "id": "r1",
        "status": "ok",
        "tenant": "t",
        "app": "a",
        "agent": "g",
        "model": "m",
        "arrival": 100.0,
        "dispatched": 100.5,
        "first_token": 101.0,
        "finished": 103.0,
        "n_in": 10,
        "n_out": 5,
        "slo": {"ttft_s": 0.8, "tpot_s": None, "e2e_s": None},
        "unit_factor": 2.0,
        "worker": "w",
        "attempts": 0,
    }
    base.update(over)
    event = decode(base)
    assert isinstance(event, Complete)
    return event


def test_row_latencies_and_cost() -> None:
    row = request_row(_event(), "vtc")
    assert row is not None
    assert (row.ttft_ms, row.e2e_ms, row.queue_ms) == (1000.0, 3000.0, 500.0)
    assert row.tpot_ms == 2000.0 / 4
    assert row.unified_cost == 2.0 * (10 + 2 * 5)
    assert row.slo_violated and row.slo_ttft_ms == 800.0
    assert row.policy == "vtc" and row.attempts == 1


def test_an_image_generation_row_records_its_images_and_units() -> None:
    row = request_row(_event(n_in=12, n_out=56, images=2, unit_factor=0.28), None)
    assert row is not None and (row.images, row.n_out) == (2, 56)
    assert row.unified_cost == pytest.approx(0.28 * (12 + 2 * 56))
    text = request_row(_event(), None)
    assert text is not None and text.images is None


def test_met_slo_and_orphans() -> None:
    ok = request_row(_event(slo={"ttft_s": 5.0}), None)
    assert ok is not None and not ok.slo_violated
    assert request_row(Complete("x", "aborted", finished=1.0, orphan=True), None) is None
    with pytest.raises(ValueError, match=r"^sender: required"):  # dead-lettered, not skipped
        request_row(Complete("x", "ok", finished=1.0, n_in=3), None)


def test_a_prompt_never_dispatched_is_no_service_and_its_wait_no_latency() -> None:
    """A request that left the queue unserved (its gateway lost) costs nothing and has no
    end-to-end latency, as the simulator counts it; its tokens are still recorded."""
    row = request_row(_event(status="withdrawn", dispatched=None, first_token=None, n_out=0), None)
    assert row is not None and (row.n_in, row.unified_cost, row.e2e_ms) == (10, 0.0, None)


def _withdrawn(reason: str, **over: object) -> Withdrawn:
    job = {"app": "tutor", "agent": "math", "model": "m", "tier": 2, "unit_factor": 2.0}
    env = envelope("r7", "acme", arrival=50.0, slo=Slo(ttft_s=1.0), **job)
    base: dict[str, object] = {"tenant": "acme", "seq": 4, "at": 53.0, "attempts": 2}
    return Withdrawn("r7", reason, envelope=env, **{**base, **over})  # type: ignore[arg-type]


def test_a_queue_timeout_is_a_timeout_row_that_violates_its_slo() -> None:
    row = withdrawal_row(_withdrawn("queue_timeout"), "vtc")
    assert row is not None
    assert (row.id, row.tenant, row.app, row.agent, row.model) == (
        "r7",
        "acme",
        "tutor",
        "math",
        "m",
    )
    assert (row.status, row.error, row.policy, row.priority) == (
        "timeout",
        "queue_timeout",
        "vtc",
        2,
    )
    assert (row.arrival, row.finished_at, row.dispatched_at, row.first_token_at) == (
        50.0, 53.0, None, None,
    )  # fmt: skip
    assert (row.n_in, row.n_out, row.unified_cost, row.attempts) == (7, 0, 0.0, 2)
    # never served: no latency (its 3 s wait is in arrival and finished_at), as the simulator
    assert (row.ttft_ms, row.tpot_ms, row.e2e_ms, row.queue_ms) == (None, None, None, None)
    assert row.slo_violated and row.slo_ttft_ms == 1000.0


@pytest.mark.parametrize(
    ("reason", "status"),
    [("client_disconnected", "withdrawn"), ("no_leader", "error"), ("submit_failed", "error")],
)
def test_a_client_that_left_is_withdrawn_and_one_given_up_on_an_error(
    reason: str, status: str
) -> None:
    """Reports count `withdrawn` as neither served nor failed: only a client that left is."""
    row = withdrawal_row(_withdrawn(reason, attempts=1), None)
    assert row is not None and (row.status, row.error, row.attempts) == (status, reason, 1)
    # its SLO violated unless its client left (regression: `withdrawn` rows said violated too)
    assert row.slo_violated is (status != "withdrawn")


def test_a_withdrawal_without_envelope_makes_no_row_and_a_broken_one_is_refused() -> None:
    """An older build's entry carries no envelope: no row, as before. One whose envelope did
    not decode is refused (the recorder dead-letters it)."""
    assert withdrawal_row(Withdrawn("r8", "queue_timeout", "acme", 1, 2.0), None) is None
    raw = {"type": "withdrawn", "id": "r9", "reason": "queue_timeout", "at": 2.0, "envelope": {}}
    broken = decode(raw)
    assert isinstance(broken, Withdrawn) and broken.envelope is None
    with pytest.raises(ValueError, match=r"envelope\.job\.id"):
        withdrawal_row(broken, None)


def test_a_controller_switch_becomes_an_audit_entry() -> None:
    event = decode(
        {
            "type": "policy_switched",
            "id": "switch-1",
            "t": 12.5,
            "old": "fcfs",
            "new": "edf",
            "reason": "deadlines",
            "selector": "rules",
            "view": '{"violation_rate":0.4}',
        }
    )
    assert isinstance(event, PolicySwitched)
    draft = audit_draft(event)
    assert (draft.actor, draft.action, draft.target, draft.at) == (
        "controller",
        "policy.switch",
        "policy",
        12.5,
    )
    assert draft.old == {"name": "fcfs"} and draft.new == {"name": "edf"}
    assert draft.reason == 'rules: deadlines; view {"violation_rate":0.4}'


def test_a_change_the_leader_made_becomes_its_audit_entry() -> None:
    event = decode(
        {
            "type": "audited",
            "id": "worker.drain-w2:8000-12.5",
            "t": 12.5,
            "actor": "scheduler:sched-a",
            "action": "worker.drain",
            "target": "worker:w2:8000",
            "old": '{"status": "active"}',
            "new": '{"status": "draining"}',
            "reason": "ARBITER_WORKERS at takeover",
        }
    )
    assert isinstance(event, Audited)
    draft = audit_draft(event)
    assert (draft.actor, draft.action, draft.target, draft.at) == (
        "scheduler:sched-a",
        "worker.drain",
        "worker:w2:8000",
        12.5,
    )
    assert draft.old == {"status": "active"} and draft.new == {"status": "draining"}
    assert draft.reason == "ARBITER_WORKERS at takeover"


def test_an_audited_event_the_audit_log_would_refuse_is_refused_at_decoding() -> None:
    """Refused where every bad event is (dead-lettered by the events stream's screen), not
    when the recorder builds the audit batch (where it would stop the whole batch)."""
    event = {"type": "audited", "id": "x", "t": 1.0, "actor": "a", "action": "b", "reason": "r"}
    with pytest.raises(EventError, match="new: not a JSON text"):
        decode({**event, "new": "{"})
    with pytest.raises(EventError, match="reason: an audited change needs one"):
        decode({**event, "reason": " "})
