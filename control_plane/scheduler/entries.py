"""Per-entry handling of the leader's input streams: a bad entry is dead-lettered, never fatal.

Rule: each arrival and each event is parsed and applied on its own; one that raises is handed
to the dead-letter stream with its reason and skipped, and the entries after it are applied as
if it had not been there. Parsing does no I/O; only the dead-lettering of failures awaits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from control_plane.contracts.events import Complete, Event, Progress, Withdrawn, WorkerFailed
from control_plane.contracts.requests import RecordError, RequestRecord
from control_plane.core.job import Job
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.state import DeadLetters

log = logging.getLogger(__name__)

CONSUMER = "scheduler"
E = TypeVar("E")
Failure = tuple[str, dict[str, Any], str]
"""(entry id, the entry, reason) of an entry that could not be applied."""


def apply_event(core: SchedulerCore, event: Event, now: float) -> Job | None:
    """Apply one event of the events stream to `core`; → the job a `complete` ended."""
    if isinstance(event, Progress):
        core.progress(event.id, event.n_out, now)
    elif isinstance(event, Complete):
        return core.complete(event.id, event.outcome(), now)
    elif isinstance(event, Withdrawn) and event.reason == "queue_timeout":
        core.time_out(event.id, now)
    elif isinstance(event, Withdrawn):
        core.withdraw(event.id)
    elif isinstance(event, WorkerFailed) and event.worker:
        core.worker_failed(event.worker, now)
    return None  # PolicySwitched: the leader's own record, for the recorder


def _reason(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def apply_each(
    entries: Iterable[tuple[str, E]],
    apply: Callable[[E], None],
    fields: Callable[[E], dict[str, Any]],
) -> list[Failure]:
    """Apply every entry; → the ones that raised, as `fields` renders them (the others are
    applied regardless)."""
    failed: list[Failure] = []
    for entry_id, entry in entries:
        try:
            apply(entry)
        except Exception as exc:  # any bug or bad value: skip this entry, keep the loop alive
            failed.append((entry_id, fields(entry), _reason(exc)))
    return failed


def arrive_each(
    core: SchedulerCore, records: Iterable[tuple[str, RequestRecord]], now: float
) -> list[Failure]:
    """Queue every still-queued record in `core`; → the ones that could not be queued, each
    with its label (the arrival's entry id: its first submission's, or for one read from its
    hash its re-queue's)."""
    failed: list[Failure] = []
    for label, record in records:
        if record.status != "queued":
            continue
        try:
            job, weights = record.job()
        except RecordError as exc:
            failed.append((label, record.to_json(), _reason(exc)))
            continue
        try:
            core.arrive(job, weights, now)
        except Exception as exc:  # a job the policy cannot take: it must not stay half-queued
            core.discard(job.id)
            failed.append((label, record.to_json(), _reason(exc)))
    return failed


async def dead_letter_all(
    dead: DeadLetters, source: str, failed: list[Failure], *, once: bool = False
) -> None:
    """Keep each failure in the dead-letter stream (kind `apply`); with `once`, a label
    already kept within a day is not kept again (for a stream read again by id)."""
    for entry_id, entry, reason in failed:
        log.warning("%s entry %s skipped: %s", source, entry_id, reason)
        await dead.add(
            consumer=CONSUMER,
            kind="apply",
            reason=reason,
            source=source,
            entry_id=entry_id,
            fields=entry,
            once=once,
        )
