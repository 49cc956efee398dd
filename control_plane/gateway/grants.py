"""Grant delivery to one gateway replica: one blocking reader, one future per waiting request.

Rule: a request's future is registered *before* its envelope is submitted, so a grant can never
arrive for a request the reader does not know yet. A grant for an id nobody waits for (the client
left as the scheduler granted it) is handed to `on_orphan`, which must release it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from control_plane.contracts.grants import Grant
from control_plane.gateway.leader_watch import LeaderWatch
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)


class GrantSource(Protocol):
    async def read(
        self, gateway_id: str, last_id: str, block_ms: int, count: int
    ) -> list[tuple[str, Grant]]: ...


class GrantWaiter:
    """Resolves per-request futures from the gateway's grant stream.

    With a `LeaderWatch`, it also tells whether grants can come at all: `no_leader` is set
    while no scheduler leader has led (or Redis has not answered) for the watch's bound, so a
    waiting request can give up with a 503 instead of waiting for a grant nobody will send.
    """

    def __init__(
        self,
        source: GrantSource,
        gateway_id: str,
        on_orphan: Callable[[Grant], Awaitable[None]],
        leader: LeaderWatch | None = None,
    ) -> None:
        self._source = source
        self._gateway_id = gateway_id
        self._on_orphan = on_orphan
        self._waiting: dict[str, asyncio.Future[Grant]] = {}
        self._releasing: set[asyncio.Task[None]] = set()
        self._last_id = "0-0"
        self.healthy = True
        self.leader = leader
        self.no_leader = leader.down if leader is not None else asyncio.Event()

    def start_after(self, stream_id: str) -> None:
        """Read grants after `stream_id` (the stream's latest id when the gateway starts)."""
        self._last_id = stream_id

    def expect(self, request_id: str) -> asyncio.Future[Grant]:
        fut: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = fut
        return fut

    def forget(self, request_id: str) -> None:
        fut = self._waiting.pop(request_id, None)
        if fut is not None and not fut.done():
            fut.cancel()

    def unwaited(self, grant: Grant) -> None:
        """Hand `on_orphan` a grant delivered to a future its waiter no longer awaits (the
        submit raised after the reader read the leader's grant): released, not kept forever."""
        task = asyncio.get_running_loop().create_task(self._release(grant))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def run(self) -> None:
        """Read grants (and watch the leader) until cancelled; survives Redis outages."""
        if self.leader is None:
            await self._read()
        else:
            await asyncio.gather(self._read(), self.leader.run())

    async def _read(self) -> None:
        """Read grants until cancelled; on Redis outages back off and resume where it left."""
        backoff = 0.05
        while True:
            try:
                entries = await self._source.read(self._gateway_id, self._last_id, 1000, 512)
                self.healthy = True
                backoff = 0.05
            except StateUnavailable:
                self.healthy = False
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            for stream_id, grant in entries:
                self._last_id = stream_id
                await self._deliver(grant)

    async def _deliver(self, grant: Grant) -> None:
        fut = self._waiting.pop(grant.request_id, None)
        if fut is not None and not fut.done():
            fut.set_result(grant)
            return
        await self._release(grant)

    async def _release(self, grant: Grant) -> None:
        try:
            await self._on_orphan(grant)
        except Exception:
            log.exception("releasing orphan grant %s failed", grant.request_id)
