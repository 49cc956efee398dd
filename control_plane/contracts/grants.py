"""A grant as it crosses processes: the scheduler's choice of worker for one request.

Wire format: one entry of `grants:<gateway>` with text fields `id`, `worker_id`,
`worker_url`, `granted_at` (epoch seconds), `attempt` and, from a leader's cycle, `policy` (the
ordering policy that decided it; absent from older writers and single grants), written by the
state package's grant scripts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from control_plane.contracts.fields import ContractError


class GrantError(ContractError):
    """An entry that is not a usable grant; the message names the field."""


@dataclass(frozen=True, slots=True)
class Grant:
    """Where a request runs: chosen by the scheduler, delivered through `grants:<gateway>`.

    `attempt` counts from 1; a re-queued request is granted again with the next attempt.
    `policy` names the ordering policy that chose it (None when not known: a fast-lane take,
    an older writer); the request's `complete` event carries it to its SQL row.
    """

    request_id: str
    worker_id: str
    worker_url: str
    granted_at: float
    attempt: int = 1
    policy: str | None = None


def decode_grant(fields: Mapping[str, str]) -> Grant:
    """The grant of one stream entry's text fields; raises `GrantError` naming the field."""
    missing = [name for name in ("id", "worker_id", "worker_url") if not fields.get(name)]
    if missing:
        raise GrantError(f"grant lacks {', '.join(missing)}")
    return Grant(
        request_id=fields["id"],
        worker_id=fields["worker_id"],
        worker_url=fields["worker_url"],
        granted_at=_number(fields, "granted_at", float, 0.0),
        attempt=int(_number(fields, "attempt", int, 1)),
        policy=fields.get("policy") or None,
    )


def _number(fields: Mapping[str, str], name: str, kind: type[float], default: float) -> float:
    raw = fields.get(name)
    if raw is None:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise GrantError(f"{name} is not a number: {raw!r}") from None
