"""What the request scripts are asked and answer: grant orders and submit outcomes."""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.contracts.grants import Grant


@dataclass(frozen=True, slots=True)
class GrantOrder:
    """One decision to grant: which request, to which worker (id and base URL)."""

    request_id: str
    worker_id: str
    worker_url: str


@dataclass(frozen=True, slots=True)
class SubmitResult:
    """Outcome of `RequestStore.submit`.

    `accepted`: the request is durable in Redis and queued (or was already, when `duplicate`),
    or granted on the fast lane (`grant` set: the worker a lent slot was taken on; the leader
    learns it from the arrival). `seq`: its global arrival number (0 when rejected). `depth`:
    the tenant's queued count after the call (when rejected: the depth that hit the cap).
    """

    accepted: bool
    seq: int
    depth: int
    duplicate: bool = False
    grant: Grant | None = None
