"""Per-entry handling of the leader's input streams: a bad entry is dead-lettered, never fatal.

Rule: each arrival and each event is parsed and applied on its own; one that raises is handed
to the dead-letter stream with its reason and skipped, and the entries after it are applied as
if it had not been there. Parsing does no I/O; only the dead-lettering of failures awaits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from control_plane.contracts.events import Complete, Event, Progress, Withdrawn
from control_plane.core.job import Job
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.state import DeadLetters

log = logging.getLogger(__name__)

CONSUMER = "scheduler"
E = TypeVar("E")
Failure = tuple[str, dict[str, Any], str]
"""(entry id, the entry, reason) of an entry that could not be applied."""

_NUMBERS = ("arrival", "n_in", "max_tokens", "tier", "unit_factor", "n_out")
_TEXTS = ("id", "tenant", "app", "agent", "model")


def parse_job(record: dict[str, Any]) -> tuple[Job, dict[str, float]]:
    """The Job and weights of a stored request record; raises ValueError/TypeError/KeyError
    when the record holds no usable envelope."""
    envelope = record.get("envelope")
    if not isinstance(envelope, dict) or not isinstance(envelope.get("job"), dict):
        errors = record.get("decode_errors")
        raise ValueError(f"no valid envelope{f' ({errors})' if errors else ''}")
    job = Job.from_json(envelope["job"])
    job.seq = int(record.get("seq", job.seq))
    for name in _NUMBERS:
        value = getattr(job, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"job.{name} must be a number, got {value!r}")
    for name in _TEXTS:
        if not isinstance(getattr(job, name), str):
            raise TypeError(f"job.{name} must be a string, got {getattr(job, name)!r}")
    weights = {str(k): float(v) for k, v in (envelope.get("weights") or {}).items()}
    return job, weights


def apply_event(core: SchedulerCore, event: Event, now: float) -> Job | None:
    """Apply one event of the events stream to `core`; → the job a `complete` ended."""
    if isinstance(event, Progress):
        core.progress(event.id, event.n_out, now)
    elif isinstance(event, Complete):
        return core.complete(event.id, event.outcome(), now)
    elif isinstance(event, Withdrawn):
        core.withdraw(event.id)
    elif event.worker:
        core.worker_failed(event.worker, now)
    return None


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


def arrive_each(core: SchedulerCore, records: list[dict[str, Any]], now: float) -> list[Failure]:
    """Queue every still-queued record in `core`; → the records that could not be queued."""
    failed: list[Failure] = []
    for record in records:
        if record.get("status") != "queued":
            continue
        entry_id = str(record.get("entry_id") or f"request {record.get('id', '?')}")
        try:
            job, weights = parse_job(record)
        except (ValueError, TypeError, KeyError) as exc:
            failed.append((entry_id, record, _reason(exc)))
            continue
        try:
            core.arrive(job, weights, now)
        except Exception as exc:  # a job the policy cannot take: it must not stay half-queued
            core.pending.pop(job.id, None)
            failed.append((entry_id, record, _reason(exc)))
    return failed


async def dead_letter_all(dead: DeadLetters, source: str, failed: list[Failure]) -> None:
    """Keep each failure in the dead-letter stream (kind `apply`)."""
    for entry_id, entry, reason in failed:
        log.warning("%s entry %s skipped: %s", source, entry_id, reason)
        await dead.add(
            consumer=CONSUMER,
            kind="apply",
            reason=reason,
            source=source,
            entry_id=entry_id,
            fields=entry,
        )
