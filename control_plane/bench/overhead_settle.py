"""Waiting, after a gateway round, for the deployment to finish that round's deferred work.

A client has its answer before the recorder has written the request's row and before the
leader has applied its completion: both read the events stream in batches, the recorder up
to `recorder_min_gap_s` later. A round that ends when its last answer arrives therefore
stops the CPU meter before the round's work is done (the recorder's and the leader's share
undercounted, the more so the longer the gap), and that work spills into the direct round
that follows, competing with it for the cores. `settle` waits until every reader of the
events stream has consumed and acknowledged everything published.
"""

from __future__ import annotations

import asyncio
import time

from control_plane.state import StateStores

POLL_S = 0.01


async def settle(redis_url: str, cluster: str, limit_s: float = 10.0) -> float:
    """Seconds until no events reader of `cluster` has anything left to consume; raises
    `TimeoutError` after `limit_s` (a reader that is down or stuck).

    The limit is checked between polls, not imposed by cancelling the loop: redis-py on
    Python 3.11 can drop a cancellation (`control_plane/state/tasks.py`), and a dropped one
    left this loop polling a stuck reader forever (it hung a CI run). One poll is bounded by
    the client's socket timeout."""
    stores = StateStores.open(redis_url, cluster, multiplex=False)
    started = time.perf_counter()
    try:
        # polled: the readers are other processes, nothing here to wait on
        while any((await stores.events.unconsumed()).values()):
            if time.perf_counter() - started >= limit_s:
                raise TimeoutError(f"an events reader of {cluster!r} is behind after {limit_s} s")
            await asyncio.sleep(POLL_S)
    finally:
        await stores.aclose()
    return time.perf_counter() - started
