"""Plain job builders for policy tests (vLLM-style: tests build requests, assert on decisions)."""

from __future__ import annotations

import itertools

from control_plane.core.job import Job, Slo
from control_plane.core.policy import Policy

_seq = itertools.count()


def job(
    id: str,
    tenant: str = "t0",
    arrival: float = 0.0,
    *,
    n_in: int = 10,
    max_tokens: int = 10,
    app: str = "app",
    agent: str = "agent",
    model: str = "default",
    tier: int = 0,
    slo: Slo | None = None,
    unit_factor: float = 1.0,
    predicted_out: int | None = None,
    seq: int | None = None,
) -> Job:
    """A job; `seq` defaults to a global arrival counter so ties are always broken."""
    return Job(
        id=id,
        tenant=tenant,
        arrival=arrival,
        n_in=n_in,
        max_tokens=max_tokens,
        app=app,
        agent=agent,
        model=model,
        seq=next(_seq) if seq is None else seq,
        tier=tier,
        slo=slo or Slo(),
        unit_factor=unit_factor,
        predicted_out=predicted_out,
    )


def always(_: Job) -> bool:
    return True


def drain(policy: Policy, now: float = 0.0, *, dispatch: bool = False) -> list[str]:
    """Pop everything with an always-true admit; the ids in order (optionally `on_dispatch`)."""
    out: list[str] = []
    while (popped := policy.pop(now, always)) is not None:
        if dispatch:
            policy.on_dispatch(popped, now)
        out.append(popped.id)
    return out
