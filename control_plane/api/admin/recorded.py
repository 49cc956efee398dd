"""An admin change is recorded in SQL before it goes live in Redis, and kept only if it did.

Rule: the SQL change and its audit row are written (flushed) in an open transaction, the live
change (a knob, the worker registry) is applied while that transaction is open, and the
transaction commits after it. Guarantees: a change the database cannot record (down,
read-only, a constraint) is refused before anything goes live, and a live change that fails
(Redis unavailable: 503) leaves no row. Only a commit failing after the live change succeeded
can leave it live without its row; that is logged as an error. A live change that timed out
may still run when Redis answers again: knobs and the worker registry refuse it once more than
a second has passed since the call (a ticket key with a 1 s expiry that the change needs:
`Knobs.replace`, `WorkerRegistry`'s `bounded` writes), and a change Redis ran whose reply was
then lost is found out from its ticket (`state/tickets.py`) and kept with its row. Only when
Redis cannot be asked at all is that left unknown (503, no row). Before, the live change came
first and a database error after it left a change in force that the audit log never saw.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from control_plane.api.admin.deps import in_thread
from control_plane.state import StateUnavailable
from storage.db import Database, Repos

log = logging.getLogger(__name__)
T = TypeVar("T")
V = TypeVar("V")

LIVE_TIMEOUT_S = 10.0
"""Longest wait for the live change while the SQL transaction is open (Redis calls give up
within their own 2 s read timeout long before this)."""


async def recorded_then_live(
    db: Database, record: Callable[[Repos], T], go_live: Callable[[], Awaitable[V]]
) -> tuple[T, V]:
    """`record(repos)` in a transaction, then `go_live()` on this event loop, then commit;
    → (what `record` returned, what `go_live` returned)."""
    loop = asyncio.get_running_loop()
    applied = False

    def work() -> tuple[T, V]:
        nonlocal applied
        with db.repos() as r:
            written = record(r)
            future = asyncio.run_coroutine_threadsafe(_awaited(go_live), loop)
            try:
                live = future.result(LIVE_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise StateUnavailable(
                    f"redis did not apply the change within {LIVE_TIMEOUT_S:g} s"
                ) from None
            applied = True
        return written, live

    try:
        return await in_thread(work)
    except Exception:
        if applied:
            log.error("a live change was applied but its SQL record did not commit")
        raise


async def _awaited(go_live: Callable[[], Awaitable[V]]) -> V:
    return await go_live()
