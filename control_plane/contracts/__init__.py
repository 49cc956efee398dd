"""Typed messages that cross process boundaries, with one codec each way.

Owns: the events of the `events` stream (`Progress`, `Complete`, `Withdrawn`, `WorkerFailed`)
and their JSON codec. Senders build these types and only these; readers get them decoded and
match on the type, never on a `"type"` string.
May import: `control_plane.core` only.
"""

from control_plane.contracts.events import (
    Complete,
    Event,
    EventError,
    Progress,
    Sender,
    Withdrawn,
    WorkerFailed,
    decode,
    encode,
)

__all__ = [
    "Complete",
    "Event",
    "EventError",
    "Progress",
    "Sender",
    "Withdrawn",
    "WorkerFailed",
    "decode",
    "encode",
]
