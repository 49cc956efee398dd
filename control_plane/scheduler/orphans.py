"""The events a new leader claims from its predecessor, against the checkpoint it restored.

Rule: an unacknowledged `complete` at or before the checkpoint's `events_applied_to` was
applied by the predecessor before it wrote that checkpoint, so the restored ledger holds its
charges (output tokens, the completion, its SLO verdict); for a request the rebuild adopted
from `inflight` (its finish mark had not landed: the mark follows the event where events and
marks do not share one transaction, `state/completions.py`) it only frees the slot. Every
other claimed event is applied again as usual: progress is cumulative, withdrawals and worker
failures repeat harmlessly, a `complete` of a request the core does not run changes no
ledger (a queued one is withdrawn), and a `complete` after the checkpoint is charged once.
Guarantee: a claimed completion is charged by exactly one leader's ledger.
"""

from __future__ import annotations

import logging

from control_plane.contracts.events import Complete, Event
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.state.trimming import parse_id

log = logging.getLogger(__name__)


def disown_charged(
    core: SchedulerCore, entries: list[tuple[str, Event]], checkpointed: str
) -> list[tuple[str, Event]]:
    """Free the slots of the completions the checkpoint reflects; → the entries to apply."""
    seen = parse_id(checkpointed)
    rest: list[tuple[str, Event]] = []
    freed = 0
    for entry_id, event in entries:
        if isinstance(event, Complete) and event.id in core.running and parse_id(entry_id) <= seen:
            freed += core.disown(event.id) is not None
        else:
            rest.append((entry_id, event))
    if freed:
        log.info("freed %d slots of completions the checkpoint had charged", freed)
    return rest
