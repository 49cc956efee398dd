"""Turning `complete` and `withdrawn` events into request rows, `policy_switched` and
`audited` events into audit entries (pure: no I/O)."""

from __future__ import annotations

import dataclasses
import json
from typing import Final

from control_plane.contracts.events import Audited, Complete, PolicySwitched, Sender, Withdrawn
from control_plane.contracts.knobs import PLUGIN_NAME_MAX
from control_plane.core.unified import unified_cost
from storage.records import REQUEST_STATUSES, RequestRecord
from storage.write_guard import AuditDraft

_WITHDRAWAL_STATUS: Final = {"client_disconnected": "withdrawn", "queue_timeout": "timeout"}


def _opt_ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _text(value: str | None) -> str | None:
    """Free text as both databases store it: PostgreSQL's text cannot hold U+0000 (a worker's
    error message may echo a client's input), so a NUL is written as U+FFFD, not refused."""
    return None if value is None else value.replace("\x00", "\ufffd")


def _label(policy: str | None) -> str | None:
    """A policy's name as its column holds it: a stored knob an older build took may be longer
    than new ones may (`PLUGIN_NAME_MAX`); cut, the row is written all the same."""
    return None if policy is None else policy[:PLUGIN_NAME_MAX]


def request_row(event: Complete, policy: str | None) -> RequestRecord | None:
    """The SQL row for a `complete` event; None for an orphan (a grant nobody was served by).

    Raises ValueError for an event that describes a request but cannot make a row (no sender,
    as in a completion sent bare; no arrival time), so the recorder dead-letters it instead
    of writing a wrong row or none without a trace.
    """
    sender = event.sender
    if event.orphan:
        return None
    if sender is None:
        raise ValueError("sender: required for a request row")
    if event.arrival is None:
        raise ValueError("arrival: required for a request row")
    slo = sender.slo
    outcome = event.outcome()
    status = event.status
    return RequestRecord(
        id=event.id,
        tenant=sender.tenant,
        arrival=event.arrival,
        status=status if status in REQUEST_STATUSES else "error",  # type: ignore[arg-type]
        app=sender.app,
        agent=sender.agent,
        model=sender.model,
        workflow=sender.workflow,
        upstream=sender.upstream,
        task=sender.task,
        priority=sender.tier,
        dispatched_at=event.dispatched,
        first_token_at=event.first_token,
        finished_at=event.finished,
        n_in=outcome.n_in,
        n_out=outcome.n_out,
        # never dispatched: the prompt is no service, its wait no latency (as the simulator)
        unified_cost=unified_cost(
            outcome.n_in if event.dispatched is not None else 0, outcome.n_out, sender.unit_factor
        ),
        slo_ttft_ms=_opt_ms(slo.ttft_s),
        slo_tpot_ms=_opt_ms(slo.tpot_s),
        slo_e2e_ms=_opt_ms(slo.e2e_s),
        slo_violated=outcome.violated(slo),
        ttft_ms=_opt_ms(outcome.ttft_s),
        tpot_ms=_opt_ms(outcome.tpot_s),
        e2e_ms=_opt_ms(outcome.e2e_s) if event.dispatched is not None else None,
        queue_ms=_opt_ms(outcome.queue_s),
        worker=event.worker,
        policy=_label(event.policy or policy),
        error=_text(event.error),
        attempts=event.attempts + 1,
        images=event.images,
    )


def withdrawal_row(event: Withdrawn, policy: str | None) -> RequestRecord | None:
    """The SQL row of a request withdrawn from the queue, the reason as its error: status
    `withdrawn` when its client left, `timeout` after the queue timeout, `error` when the
    gateway gave up on a client still there (no leader, a failed submit); never dispatched,
    so no service and no latencies, and an SLO it carried violated unless its client left (as
    reports count them). None for an entry without an envelope (an older build's).

    Raises ValueError when the envelope did not decode, so the recorder dead-letters it.
    """
    if event.envelope is None:
        if event.envelope_error is not None:
            raise ValueError(event.envelope_error)
        return None
    if event.at is None:
        raise ValueError("at: required for a request row")
    job = event.envelope.job
    status = _WITHDRAWAL_STATUS.get(event.reason, "error")
    complete = Complete(
        id=event.id,
        status=status,
        finished=event.at,
        n_in=job.n_in,
        n_in_est=job.n_in,
        error=event.reason or None,
        sender=Sender.of(job),
        arrival=job.arrival,
        attempts=max(0, event.attempts - 1),  # the event counts the first attempt, as Redis
    )
    row = request_row(complete, policy)
    if row is not None and status == "withdrawn":  # its client left: no SLO was missed
        row = dataclasses.replace(row, slo_violated=False)
    return row


def audit_draft(event: PolicySwitched | Audited) -> AuditDraft:
    """The audit entry of an automatic policy switch (what, why, and the view it decided
    on), or of another change the leader made on its own (as it says)."""
    if isinstance(event, Audited):
        return AuditDraft(
            actor=event.actor,
            action=event.action,
            target=event.target,
            old=json.loads(event.old),
            new=json.loads(event.new),
            reason=event.reason,
            at=event.t,
        )
    return AuditDraft(
        actor="controller",
        action="policy.switch",
        target="policy",
        old={"name": event.old},
        new={"name": event.new},
        reason=f"{event.selector}: {event.reason or 'switch'}; view {event.view}",
        at=event.t,
    )
