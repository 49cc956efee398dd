"""The leader's reads of the events stream, paced while nothing waits for them.

At low load almost every request goes through the fast lane, and its events (progress, the
completion) reach a leader that nobody waits on: the slot was the gateway's already, and the
next request takes another lent one. Read one request's events at a time, the leader wakes,
reads, applies, acknowledges and runs a dispatch cycle for each request, at about as much CPU
per request as the gateway itself (`arbiter bench overhead`, c=1), on cores the request path
shares.
"""

from __future__ import annotations

import asyncio
import contextlib


class EventPacer:
    """Rule: after a batch of events the leader reads the next one at once when a request
    waits in its queues (a completion may free the slot it waits for); otherwise it first
    waits up to `gap_s`, so that the events of several requests come in one read. A request
    queued meanwhile (`wake`) ends the wait.

    Guarantee: while anything is queued, events are read as if unpaced; a completion reaches
    the leader at most `gap_s` later than unpaced otherwise (what lags by that much: its live
    view and the in-flight counts it lends fast-lane slots by). `gap_s` 0 turns pacing off.
    """

    def __init__(self, gap_s: float) -> None:
        self.gap_s = gap_s
        self._wanted = asyncio.Event()

    def wake(self) -> None:
        """Something is queued: a pause in progress ends now."""
        self._wanted.set()

    async def pause(self, waiting: bool) -> None:
        """Before the next read: nothing if `waiting` (a request is queued), else up to
        `gap_s`, less if `wake` is called meanwhile."""
        if waiting or self.gap_s <= 0:
            return
        self._wanted.clear()  # no await since `waiting` was read: a wake after it is kept
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.gap_s):
                await self._wanted.wait()
