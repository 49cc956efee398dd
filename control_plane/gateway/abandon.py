"""Submits that failed without an answer: what Redis did with them is made definite.

Rule: when the submit call raises (a read timeout, a connection lost after the call was sent,
a cancelled caller), Redis may have run it, may still run it, or never will. The client has its
error at once; off the response path the request is then abandoned (`RequestStore.abandon`,
one script): an id Redis does not know gets a tombstone, so a submit that runs later changes
nothing; a request the call queued is withdrawn; a fast-lane slot it took is released like an
orphan grant (its `complete` event, then the mark). A request the leader granted meanwhile
reaches the grant reader with nobody waiting and is released there. Retried with backoff for
`ABANDON_RETRY_S` through an outage; one task per replica works through them in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from control_plane.contracts.grants import Grant
from control_plane.state import RequestStore
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
ABANDON_RETRY_S = 60.0
"""How long abandoning a failed submit is retried while Redis does not answer."""
REASON = "submit_failed"


class SubmitAbandoner:
    """Abandons the failed submits of one gateway replica (see the module docstring).

    Guarantee: once `abandon(id)` returns, the request either never takes effect or is ended
    (withdrawn, or released with its event) as soon as Redis answers within `ABANDON_RETRY_S`;
    after that it is logged, and left to the sweeper should this gateway be lost.
    """

    def __init__(
        self,
        requests: RequestStore,
        gateway_id: str,
        release: Callable[[Grant], Awaitable[None]],
        retry_s: float = ABANDON_RETRY_S,
    ) -> None:
        self._requests = requests
        self._gateway_id = gateway_id
        self._release = release
        self._retry_s = retry_s
        self._pending: deque[tuple[str, float]] = deque()
        """Request ids to abandon, with the monotonic time their retries end."""
        self._task: asyncio.Task[None] | None = None

    def abandon(self, request_id: str) -> None:
        """Abandon `request_id` in the background (at once when Redis answers)."""
        self._pending.append((request_id, time.monotonic() + self._retry_s))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def settled(self) -> None:
        """Return once every request handed over so far is abandoned or given up."""
        while self._task is not None and not self._task.done():
            await asyncio.gather(self._task, return_exceptions=True)

    async def _work(self) -> None:
        delay = 0.25
        while self._pending:
            request_id, deadline = self._pending[0]
            try:
                await self._once(request_id)
            except StateUnavailable:
                if time.monotonic() + delay > deadline:
                    self._give_up(delay)
                    continue
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            except Exception:  # a refusal, not an outage: retrying would meet it again
                log.exception("Redis refused to abandon the failed submit of %s", request_id)
            self._pending.popleft()
            delay = 0.25

    async def _once(self, request_id: str) -> None:
        now = time.time()
        result = await self._requests.abandon(request_id, gateway_id=self._gateway_id, now=now)
        if result.outcome == "queued":
            # False: granted meanwhile, and the grant reader releases it (nobody waits for it)
            await self._requests.withdraw(request_id, now=now, reason=REASON)
        elif result.grant is not None:
            await self._release(result.grant)

    def _give_up(self, delay: float) -> None:
        """Drop the head and every request behind it whose retries end within `delay` (in
        order of their deadlines: FIFO), with one warning."""
        horizon, dropped = time.monotonic() + delay, 0
        while self._pending and (not dropped or self._pending[0][1] < horizon):
            self._pending.popleft()
            dropped += 1
        log.warning("could not abandon %d failed submits in Redis (Redis did not answer)", dropped)
