"""Typed messages that cross process boundaries, with one codec each way.

Owns: the events of the `events` stream (`Progress`, `Complete`, `Withdrawn`, `WorkerFailed`);
a request's `Envelope` and stored `RequestRecord`; a worker's registry `WorkerEntry` and its
`WorkerSample` scrape; the `Grant` of `grants:<gateway>`; and one codec each way for each, on
the wire format of the previous release. Senders build these types and only these; readers
get them decoded (every refusal names its field) and never index a dict by a field name.
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
