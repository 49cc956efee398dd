"""Turning `complete` events into request rows (pure: no I/O)."""

from __future__ import annotations

from typing import Any

from control_plane.core.job import Slo, outcome_of
from storage.records import REQUEST_STATUSES, RequestRecord

W_P, W_Q = 1.0, 2.0


def _opt_ms(seconds: Any) -> float | None:
    return None if seconds is None else float(seconds) * 1000.0


def request_row(event: dict[str, Any], policy: str | None) -> RequestRecord | None:
    """The SQL row for a `complete` event; None for events that describe no request."""
    if event.get("orphan") or "tenant" not in event:
        return None
    slo = Slo(**(event.get("slo") or {}))
    outcome = outcome_of(event)
    status = str(event.get("status", "error"))
    unit = float(event.get("unit_factor") or 1.0)
    return RequestRecord(
        id=str(event["id"]),
        tenant=str(event["tenant"]),
        arrival=float(event["arrival"]),
        status=status if status in REQUEST_STATUSES else "error",  # type: ignore[arg-type]
        app=str(event.get("app") or "default"),
        agent=str(event.get("agent") or "default"),
        model=str(event.get("model") or "default"),
        workflow=event.get("workflow"),
        upstream=event.get("upstream"),
        task=event.get("task"),
        priority=int(event.get("tier") or 0),
        dispatched_at=event.get("dispatched"),
        first_token_at=event.get("first_token"),
        finished_at=event.get("finished"),
        n_in=outcome.n_in,
        n_out=outcome.n_out,
        unified_cost=unit * (W_P * outcome.n_in + W_Q * outcome.n_out),
        slo_ttft_ms=_opt_ms(slo.ttft_s),
        slo_tpot_ms=_opt_ms(slo.tpot_s),
        slo_e2e_ms=_opt_ms(slo.e2e_s),
        slo_violated=outcome.violated(slo),
        ttft_ms=_opt_ms(outcome.ttft_s),
        tpot_ms=_opt_ms(outcome.tpot_s),
        e2e_ms=_opt_ms(outcome.e2e_s),
        queue_ms=_opt_ms(outcome.queue_s),
        worker=event.get("worker"),
        policy=event.get("policy") or policy,
        error=event.get("error"),
        attempts=int(event.get("attempts") or 0) + 1,
    )
