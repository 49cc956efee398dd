"""A watch on the scheduler's event loop: how late it runs a short timer.

Rule: every `period_s` a timer is set; how late it fired is observed, and a delay of at least
`warn_s` is logged. Guarantee: a loop blocked long enough to delay lease renewals (renewed
every TTL/3; the term ends before the TTL) leaves a number in
`arbiter_scheduler_loop_late_seconds` and, from `warn_s`, a warning naming its length — a
step-down is otherwise a line with no cause.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


async def watch_loop(
    observe: Callable[[float], None],
    *,
    period_s: float = 0.1,
    warn_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Forever: observe how late each `period_s` timer fired."""
    while True:
        start = clock()
        await asyncio.sleep(period_s)
        late = max(0.0, clock() - start - period_s)
        observe(late)
        if late >= warn_s:
            log.warning("the event loop was blocked for %.2fs (lease renewals wait)", late)
