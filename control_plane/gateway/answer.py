"""Answering the client from a primed relay: streamed as SSE, or collected into one body.

Rule: the relay was primed (`Relay.prime`: the answer read up to its first output) before any
of this runs, so a failure here comes after the request was committed to this worker: a
streamed client gets an SSE error event (code `worker_failed`) after what was read before it,
a non-streamed one a 502; either way the request is finished with status `error` and a
`worker_failed` event. A client that leaves frees the worker (the relay closes its connection,
so the worker aborts the request) and the request is finished `aborted` with its tokens so far.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from control_plane.contracts.events import WorkerFailed
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.errors import ApiError
from control_plane.gateway.flight import Flight
from control_plane.gateway.proxy import WorkerUnreachable
from control_plane.gateway.relay import (
    DONE,
    FinalPiece,
    Relay,
    StreamBroken,
    aggregate,
    error_event,
)
from control_plane.state.tasks import stop_tasks

Finish = Callable[[Flight, str, str | None], Awaitable[None]]


class Answers:
    """Sends one gateway replica's answers (see the module docstring).

    Guarantee: every answer started here finishes its flight once (`finish`), after closing
    the worker's connection, whatever way it ends.
    """

    def __init__(self, deps: GatewayDeps, finish: Finish) -> None:
        self.d = deps
        self._finish = finish

    def streamed(self, flight: Flight, relay: Relay) -> StreamingResponse:
        """The streamed answer's response (its body is `stream`). A client already gone when
        it starts is seen at once: `api/hot_path.py` starts the body, cancels it at its first
        wait and closes it; Starlette (ASGI spec 2.3, as uvicorn serves) starts it and cancels
        it at its first wait too — so `stream` still closes the relay and ends it `aborted`."""
        return StreamingResponse(
            self.stream(flight, relay),
            media_type="text/event-stream",
            headers=flight.response_headers(),
        )

    async def stream(self, flight: Flight, relay: Relay) -> AsyncIterator[bytes]:
        """The client's SSE bytes. The piece read with the worker's `[DONE]` is held until the
        request is finished (`Finisher.finish`: its event and status queued) and then sent
        with `[DONE]` as one `FinalPiece`: the answer's end in one write, after the finish."""
        status: str = "aborted"
        error: str | None = "client disconnected"
        tail: list[bytes] = []
        try:
            async for data in relay.stream():
                if relay.ended:
                    tail.append(data)
                else:
                    yield data
            status, error = "ok", None
        except (StreamBroken, WorkerUnreachable) as exc:
            status, error = "error", f"worker failed mid-stream: {exc}"
            self._failed(flight, exc)
            # what was read with the error (and `[DONE]`) reaches the client before it
            yield b"".join(tail) + error_event(f"The worker failed while streaming: {exc}")
        finally:
            await relay.close()
            await self._finish(flight, status, error)
        if status == "ok":
            tail.append(DONE)
            yield FinalPiece(b"".join(tail))

    async def collect(
        self, flight: Flight, relay: Relay, left: Callable[[], Awaitable[None]]
    ) -> Response:
        """The whole answer in one body; a client that leaves first (`left` returns) frees
        the worker (`aborted`, 499)."""
        status, error = "error", None
        collecting = asyncio.ensure_future(relay.collect(flight.chat))
        gone = asyncio.ensure_future(left())
        try:
            await asyncio.wait({collecting, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not collecting.done():
                status, error = "aborted", "client disconnected"
            else:
                collecting.result()
                status = "ok"
        except (StreamBroken, WorkerUnreachable) as exc:
            status, error = "error", f"worker failed mid-answer: {exc}"
            self._failed(flight, exc)
        finally:
            await stop_tasks([gone, collecting])
            await relay.close()
            await self._finish(flight, status, error)
        if status == "aborted":
            return Response(status_code=499)
        if error is not None:
            raise ApiError(502, f"The worker failed while answering: {error}", code="worker_failed")
        body = aggregate(
            flight.stats, chat=flight.chat, request_id=flight.id, model=flight.job.model
        )
        return JSONResponse(body, headers=flight.response_headers())

    def _failed(self, flight: Flight, exc: Exception) -> None:
        worker = flight.grant.worker_id if flight.grant else None
        self.d.reporter.emit(WorkerFailed(flight.id, worker, str(exc), time.time()))


async def wait_disconnect(request: Request) -> None:
    """Return once the client has disconnected (reads the request's ASGI messages)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
