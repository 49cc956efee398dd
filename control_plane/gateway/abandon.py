"""Submits that failed without an answer: what Redis did with them is made definite.

Rule: when the submit call raises (a read timeout, a connection lost after the call was sent,
a cancelled caller), Redis may have run it, may still run it, or never will. The client has its
error at once; off the response path the request is then abandoned (`RequestStore.abandon`,
one script): an id Redis does not know gets a tombstone, so a submit that runs later changes
nothing; a request the call queued is withdrawn, its event carrying the envelope the gateway
submitted so that the recorder writes its row (status `error`: its client had a 503, or
nothing at a shutdown past its grace); a fast-lane slot it took is released with its
`complete` event (status `error`, the same envelope's request, so the same row), then the
mark. A request the leader granted meanwhile reaches the grant reader with nobody waiting; the
reader hands it to `release_unwaited`, which releases it with the same `complete` (status
`error`, a row) while the envelope is kept (`MAX_KEPT` failed submits, the newest), else as an
orphan (no row), as every other grant nobody waits for. Retried with backoff
(capped at `MAX_DELAY_S`) for as long as the process lives, however long Redis is away: a
submit can run late in Redis at any time until then (a stall, a partition whose data the
kernel keeps resending), and a take nobody abandons holds its worker's slot for the life of
this gateway (no grant message tells a gateway of a take, and the sweeper touches only lost
gateways). One task per replica works through them in order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

from control_plane.contracts.grants import Grant
from control_plane.contracts.requests import Envelope
from control_plane.state import RequestStore
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
FIRST_DELAY_S = 0.25
MAX_DELAY_S = 5.0
MAX_PENDING = 100_000
"""Most failed submits kept for abandoning (about 1.2 KB each with the envelope kept for the
withdrawal's row: some 120 MB at the cap); beyond, the oldest are dropped with a warning —
only a very long outage under heavy load gets there."""
MAX_KEPT = 10_000
"""Envelopes kept of failed submits that may still meet a leader's grant (the newest)."""
REASON = "submit_failed"


class SubmitAbandoner:
    """Abandons the failed submits of one gateway replica (see the module docstring).

    Guarantee: once `abandon(id)` returns, the request either never takes effect or is ended
    (withdrawn, or released with its event) once Redis answers, while this process lives and
    fewer than `max_pending` failed submits wait behind it; a grant of it the reader hands to
    `release_unwaited` is released with the same row while fewer than `MAX_KEPT` failed submits
    came after it.
    """

    def __init__(
        self,
        requests: RequestStore,
        gateway_id: str,
        release: Callable[[Grant, Envelope, str], Awaitable[None]],
        release_orphan: Callable[[Grant], Awaitable[None]],
        *,
        delays: tuple[float, float] = (FIRST_DELAY_S, MAX_DELAY_S),
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._requests = requests
        self._gateway_id = gateway_id
        self._release = release
        self._release_orphan = release_orphan
        self._delays = delays
        self._max_pending = max_pending
        self._pending: deque[tuple[str, Envelope]] = deque()
        """Request ids to abandon, with what was submitted, oldest first."""
        self._kept: OrderedDict[str, Envelope] = OrderedDict()
        """What was submitted, by request id, until the request is ended here or by the grant
        reader (the newest `MAX_KEPT`)."""
        self._task: asyncio.Task[None] | None = None

    def abandon(self, request_id: str, envelope: Envelope) -> None:
        """Abandon `request_id`, submitted as `envelope`, in the background (at once when
        Redis answers)."""
        if len(self._pending) >= self._max_pending:
            dropped, _ = self._pending.popleft()
            log.warning(
                "%d failed submits wait for Redis: %s dropped unabandoned (its slot, if it "
                "took one, stays held until this gateway restarts)",
                self._max_pending,
                dropped,
            )
        self._pending.append((request_id, envelope))
        self._kept[request_id] = envelope
        if len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def release_unwaited(self, grant: Grant) -> None:
        """Release a grant nobody waits for: a failed submit's with its `complete` built from
        the envelope submitted (a row: its client had a 503), any other as an orphan."""
        envelope = self._kept.pop(grant.request_id, None)
        if envelope is None:
            await self._release_orphan(grant)
        else:
            await self._release(grant, envelope, REASON)

    async def settled(self) -> None:
        """Return once every request handed over so far is abandoned (or dropped past the cap)."""
        while self._task is not None and not self._task.done():
            await asyncio.gather(self._task, return_exceptions=True)

    async def _work(self) -> None:
        first, most = self._delays
        delay = first
        while self._pending:
            request_id, envelope = head = self._pending[0]
            try:
                await self._once(request_id, envelope)
            except StateUnavailable:
                await asyncio.sleep(delay)
                delay = min(delay * 2, most)
                continue
            except Exception:  # a refusal, not an outage: retrying would meet it again
                log.exception("Redis refused to abandon the failed submit of %s", request_id)
            if self._pending and self._pending[0] is head:
                self._pending.popleft()
            delay = first

    async def _once(self, request_id: str, envelope: Envelope) -> None:
        now = time.time()
        result = await self._requests.abandon(request_id, gateway_id=self._gateway_id, now=now)
        if result.outcome == "queued":
            # False: granted meanwhile, and the grant reader releases it (nobody waits for it)
            if await self._requests.withdraw(request_id, now=now, reason=REASON, envelope=envelope):
                self._kept.pop(request_id, None)
        elif result.grant is not None:  # a take: no grant message will come
            self._kept.pop(request_id, None)
            await self._release(result.grant, envelope, REASON)
        elif result.outcome == "absent":
            self._kept.pop(request_id, None)
        # "other": the leader granted it (its grant, not yet read, finds the envelope kept),
        # or it ended
