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


@dataclass(frozen=True, slots=True)
class Abandoned:
    """Outcome of `RequestStore.abandon` (a submit that failed without an answer).

    `outcome`: `absent` — the call never ran, and a tombstone now makes sure it never will;
    `queued` — it ran and queued the request (the caller withdraws it); `taken` — it took a
    fast-lane slot for the caller (`grant` set; the caller releases it); `other` — the request
    is the leader's grant, ended, or not the caller's (nothing to do).
    """

    outcome: str
    grant: Grant | None = None
