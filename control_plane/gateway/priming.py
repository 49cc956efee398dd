"""Priming a relay (`Relay.prime`: the answer read up to its first output) while watching for
the client's leaving.

Rule: a client that leaves while its request is in prefill frees the worker within
`WATCH_AFTER_S` of leaving, or at once, and its request ends `aborted` (`ClientLeft`), not at
the first output seconds later. A request that waited for a grant already has a disconnect
watcher, and the prime is raced against it. On the fast lane, which has none (a task per
request on the hot path, where most prefills end within milliseconds), the prime runs alone
for `WATCH_AFTER_S` and only then is a watcher started, which cancels the prime if the client
goes first. Guarantee: the relay is closed whenever priming raises (the worker aborts the
request); a cancellation that is not the client's (a shutdown) stays a cancellation.
"""

from __future__ import annotations

import asyncio

from fastapi import Request

from control_plane.gateway.answer import wait_disconnect
from control_plane.gateway.proxy import ClientLeft
from control_plane.gateway.relay import Relay
from control_plane.state.tasks import stop_tasks

WATCH_AFTER_S = 0.05
"""How long a prime on the fast lane runs before its client's disconnect is watched."""


async def prime_unless_left(
    relay: Relay, left: asyncio.Future[None] | None, request: Request
) -> None:
    """`relay.prime()`, raced against `left` (the client's disconnect) when given, else
    against a watcher of `request` started after `WATCH_AFTER_S`: `ClientLeft` when the client
    goes first. The relay is closed when this raises."""
    if left is None:
        await _prime_watched_late(relay, request)
        return
    priming = asyncio.ensure_future(relay.prime())
    try:
        await asyncio.wait({priming, left}, return_when=asyncio.FIRST_COMPLETED)
        if not priming.done():
            raise ClientLeft
        priming.result()
    except BaseException:
        await stop_tasks([priming])
        await relay.close()
        raise


async def _prime_watched_late(relay: Relay, request: Request) -> None:
    task = asyncio.current_task()
    assert task is not None
    watch = LateWatch(task, request)
    timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, watch.start)
    try:
        await relay.prime()
    except asyncio.CancelledError:
        timer.cancel()
        # not the client's (a shutdown), or a shutdown's too: the cancellation stays
        if not watch.stop() or task.uncancel() > 0:
            await relay.close()
            raise
        await relay.close()
        raise ClientLeft from None
    except BaseException:
        timer.cancel()
        watch.stop()  # before the close's await, lest a late disconnect cancel that
        await relay.close()
        raise
    finally:
        timer.cancel()
        watch.stop()


class LateWatch:
    """A disconnect watcher of `request`, once started, that cancels `task` when the client
    leaves. Guarantee: after `stop()` it cancels nothing; `stop()` says whether it did."""

    def __init__(self, task: asyncio.Task[object], request: Request) -> None:
        self._task = task
        self._request = request
        self._watcher: asyncio.Task[None] | None = None
        self._left = False
        self._stopped = False

    def start(self) -> None:
        """Watch from now on."""
        if self._stopped:
            return
        self._watcher = asyncio.ensure_future(wait_disconnect(self._request))
        self._watcher.add_done_callback(self._on_done)

    def stop(self) -> bool:
        """Stop watching; → whether the client's leaving cancelled the task."""
        self._stopped = True  # a watcher done in this turn already has its callback queued
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.remove_done_callback(self._on_done)
            watcher.cancel()
        return self._left

    def _on_done(self, watcher: asyncio.Task[None]) -> None:
        if watcher.cancelled() or watcher.exception() is not None or self._stopped:
            return
        self._left = True
        self._task.cancel()
