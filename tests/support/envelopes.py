"""Envelopes for tests that submit requests straight to the state package."""

from __future__ import annotations

from typing import Any

from control_plane.contracts.requests import Envelope
from control_plane.core.job import Job


def envelope(
    rid: str, tenant: str = "a", *, gateway: str = "gw1", arrival: float = 0.0, **job: Any
) -> Envelope:
    """A valid envelope for request `rid` (7 prompt tokens, 16 max) of `tenant`."""
    fields: dict[str, Any] = {"n_in": 7, "max_tokens": 16, **job}
    return Envelope(Job(id=rid, tenant=tenant, arrival=arrival, **fields), {}, gateway)
