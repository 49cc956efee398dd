"""Stopping tasks that talk to Redis: a cancellation can be lost, so it is repeated."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


async def stop_tasks(
    tasks: Iterable[asyncio.Task[Any]],
    patience_s: float = 0.25,
    within_s: float | None = None,
) -> set[asyncio.Task[Any]]:
    """Cancel `tasks` and return once every one of them has ended (or `within_s` has passed).

    Rule: a cancellation can be lost. Python 3.11's `asyncio.wait_for` (redis-py sends every
    command through it) returns the result of an operation that completes in the same loop
    iteration as the cancel and drops the `CancelledError`; a service loop then runs on. So a
    task still running after `patience_s` is cancelled again, until none is left.
    Guarantee: with `within_s=None` every task has ended on return; otherwise the tasks still
    running after `within_s` are returned (logged), so a shutdown is bounded.
    """
    loop = asyncio.get_running_loop()
    deadline = None if within_s is None else loop.time() + within_s
    pending = {task for task in tasks if not task.done()}
    rounds = 0
    while pending:
        for task in pending:
            task.cancel()
        wait_s = patience_s if deadline is None else min(patience_s, deadline - loop.time())
        if wait_s <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=wait_s)
        rounds += 1
        if pending and rounds % 20 == 0:
            log.error("tasks %s ignore cancellation; cancelling again", _names(pending))
    if pending:
        log.error("tasks %s still running after %.1f s; leaving them", _names(pending), within_s)
    return pending


def _names(tasks: set[asyncio.Task[Any]]) -> list[str]:
    return sorted(task.get_name() for task in tasks)
