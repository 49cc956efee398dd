"""Drives the engine model on the wall clock and fans its token events out to request streams.

Time: engine time is ``loop.time() - t0`` seconds; the latency model is built with the speed
factor (``LatencyModel(profile, speed)``), so engine seconds are wall seconds and every timing
the driver reports needs no conversion.

Loop: no task polls. One timer (``loop.call_at``) is armed at the engine's
``next_event_time()``; when it fires, ``advance(now)`` runs every step that has ended and each
``TokenEvent`` is pushed to its request's :class:`TokenStream`; the timer is re-armed. ``submit``
and ``abort`` re-arm it too, since they can move the next event earlier.

Metrics (seconds): TTFT = end of the step that produced the first token − arrival; ITL = gap
between the ends of consecutive token steps; e2e = end of the finishing step − arrival; queue
time = start of the first-token step − arrival (exact for prompts prefilled in one step, which
is every prompt up to ``max_num_batched_tokens`` when the budget is not shared).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from workers.engine import Engine, EngineConfig, EngineRequest, LatencyModel, LatencyProfile
from workers.sim.metrics import EngineGauges, SimMetrics


@dataclass(slots=True, frozen=True)
class Delivery:
    """``n`` tokens of one engine step for one request; ``finished`` on its last step."""

    n: int
    finished: bool


class TokenStream:
    """One request's queue of deliveries, filled by the driver and drained by its HTTP handler.

    Guarantee: deliveries come out in engine order; after ``close()`` (abort or client gone)
    ``next_batch`` returns an empty list instead of waiting.
    """

    __slots__ = (
        "_pending",
        "_waiter",
        "arrival",
        "closed",
        "finished",
        "id",
        "last_t",
        "n_in",
        "n_out",
        "produced",
    )

    def __init__(self, req_id: str, n_in: int, n_out: int, arrival: float) -> None:
        self.id = req_id
        self.n_in = n_in
        self.n_out = n_out
        self.arrival = arrival
        self.last_t = -1.0
        self.produced = 0
        self.finished = False
        self.closed = False
        self._pending: deque[Delivery] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def push(self, delivery: Delivery) -> None:
        """Queue a delivery and wake the reader."""
        self._pending.append(delivery)
        self._wake()

    def close(self) -> None:
        """No more deliveries will come; wakes a waiting reader."""
        self.closed = True
        self._wake()

    async def next_batch(self) -> list[Delivery]:
        """Every delivery queued so far, waiting for at least one unless closed."""
        while not self._pending and not self.closed:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None
        out = list(self._pending)
        self._pending.clear()
        return out


class EngineDriver:
    """Owns the engine, its timer and the live streams; single-threaded on the event loop."""

    def __init__(
        self,
        profile: LatencyProfile,
        config: EngineConfig,
        *,
        speed: float,
        seed: int,
        metrics: SimMetrics | None = None,
    ) -> None:
        self.engine = Engine(LatencyModel(profile, speed), config, seed)
        self.metrics = metrics
        self._streams: dict[str, TokenStream] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._t0 = 0.0
        self._timer: asyncio.Handle | None = None  # uvloop's call_at handle has no when()
        self._timer_when = 0.0

    def now(self) -> float:
        """Engine time now (the loop clock since the first request)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._t0 = self._loop.time()
        return self._loop.time() - self._t0

    def gauges(self) -> EngineGauges:
        """The engine's state for ``/metrics``."""
        e = self.engine
        return EngineGauges(
            num_running=e.num_running,
            num_waiting=e.num_waiting,
            kv_usage=e.kv_usage,
            num_preemptions=e.num_preemptions,
            prompt_tokens_total=e.prompt_tokens_total,
            generation_tokens_total=e.generation_tokens_total,
        )

    def submit(self, req_id: str, n_in: int, n_out: int, priority: int) -> TokenStream:
        """Add a request now; raises ValueError if the engine refuses it (id reused, too big)."""
        now = self.now()
        self.engine.add(EngineRequest(req_id, n_in, n_out, priority, now), now)
        stream = TokenStream(req_id, n_in, n_out, now)
        self._streams[req_id] = stream
        self._arm()
        return stream

    def abort(self, req_id: str) -> bool:
        """Abort a live request (frees its KV at once); False if it already finished."""
        stream = self._streams.pop(req_id, None)
        if stream is None:
            return False
        self.engine.abort(req_id, self.now())
        stream.close()
        if self.metrics is not None:
            self.metrics.finished("abort", stream.n_in, stream.produced)
        self._arm()
        return True

    def _arm(self) -> None:
        t = self.engine.next_event_time()
        timer = self._timer
        if t is None:
            if timer is not None:
                timer.cancel()
                self._timer = None
            return
        assert self._loop is not None
        when = self._t0 + t
        if timer is not None:
            if self._timer_when <= when:
                return
            timer.cancel()
        self._timer = self._loop.call_at(when, self._fire)
        self._timer_when = when

    def _fire(self) -> None:
        self._timer = None
        for step in self.engine.advance(self.now()):
            for ev in step.tokens:
                stream = self._streams.get(ev.req_id)
                if stream is not None:
                    self._deliver(stream, ev.n, ev.first, ev.finished, step.start, step.end)
        self._arm()

    def _deliver(
        self, stream: TokenStream, n: int, first: bool, finished: bool, start: float, end: float
    ) -> None:
        m = self.metrics
        if m is not None:
            if first:
                m.ttft.observe(end - stream.arrival)
                m.queue.observe(start - stream.arrival)
            else:
                m.itl.observe(end - stream.last_t)
        stream.last_t = end
        stream.produced += n
        if finished:
            stream.finished = True
            del self._streams[stream.id]
            if m is not None:
                m.e2e.observe(end - stream.arrival)
        stream.push(Delivery(n, finished))

    def shutdown(self) -> None:
        """Cancel the timer and close every stream (server shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
