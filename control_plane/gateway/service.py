"""The gateway's request path: door checks → Redis → grant → worker → client.

Guarantees (docs/architecture.md §2): the envelope is in Redis before the gateway waits; every
accepted request ends served or with an explicit error; a client that leaves while queued is
withdrawn, one that leaves while streaming has its upstream closed (the worker aborts it) and its
tokens so far are still reported; a worker that fails before the first token gets the request
re-queued once in its original place. The tokens of every finished request (any status) are
counted against its tenant's daily budget off the response path (`RedisDoorLimits`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from control_plane.contracts.events import WorkerFailed
from control_plane.contracts.grants import Grant
from control_plane.gateway.abandon import SubmitAbandoner
from control_plane.gateway.deps import GatewayDeps, ModelEntry
from control_plane.gateway.door import Body, build_flight
from control_plane.gateway.errors import ApiError, given_up, unavailable
from control_plane.gateway.finish import Finisher
from control_plane.gateway.flight import Flight
from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.identity import NodeInfo
from control_plane.gateway.images import (
    ImageGenerationRequest,
    answer_images,
    build_image_flight,
    refuse_image_model,
)
from control_plane.gateway.proxy import (
    ClientLeft,
    WorkerRejected,
    WorkerUnreachable,
    open_unless_left,
    open_upstream,
)
from control_plane.gateway.relay import (
    DONE,
    FinalPiece,
    Relay,
    StreamBroken,
    aggregate,
    error_event,
)
from control_plane.gateway.submit import resubmit_if_lost, submit_flight
from control_plane.gateway.tags import RequestTags, read_tags
from control_plane.state.errors import StateUnavailable
from control_plane.state.tasks import stop_tasks

log = logging.getLogger(__name__)
NO_LEADER_RETRY_AFTER_S = 2
DEBUG_TIMING = "x-arbiter-debug-timing"
"""Request header: `1` adds `X-Arbiter-Timing` (the request's hop stamps) to the answer."""


class Gateway:
    """Serves tenant requests for one gateway replica."""

    def __init__(self, deps: GatewayDeps) -> None:
        self.d = deps
        self._finisher = Finisher(deps)
        self.release_orphan = self._finisher.release_orphan
        self._abandoner = SubmitAbandoner(
            deps.requests,
            deps.gateway_id,
            functools.partial(self._finisher.release_orphan, error="submit failed"),
        )

    @property
    def _waiter(self) -> GrantWaiter:
        assert self.d.waiter is not None, "the app factory wires the grant waiter"
        return self.d.waiter

    async def serve(self, request: Request, body: Body, tenant_name: str) -> Response:
        """A chat or text completion: streamed or collected, as the client asked."""
        received = time.time()
        tags, node, model = await self._door(request, body.model, body.metadata, tenant_name)
        refuse_image_model(model)
        flight = build_flight(self.d, body, tags, node, model, received)
        flight.debug_timing = request.headers.get(DEBUG_TIMING) == "1"
        resp = await self._queue_and_open(request, flight)
        if isinstance(resp, Response):
            return resp
        relay = Relay(
            resp,
            flight.stats,
            lambda n, t: self._tokens(flight, t),
            want_usage=_wants(flight, "include_usage"),
            want_continuous=_wants(flight, "continuous_usage_stats"),
        )
        if body.stream:
            return StreamingResponse(
                self._stream(flight, relay),
                media_type="text/event-stream",
                headers=flight.response_headers(),
            )
        return await self._collect(flight, relay, request)

    async def serve_images(
        self, request: Request, body: ImageGenerationRequest, tenant_name: str
    ) -> Response:
        """An image generation (`control_plane.gateway.images`), one JSON answer."""
        received = time.time()
        tags, node, model = await self._door(request, body.model, body.metadata, tenant_name)
        flight = build_image_flight(self.d, body, tags, node, model, received)
        resp = await self._queue_and_open(request, flight)
        if isinstance(resp, Response):
            return resp
        return await answer_images(flight, resp, self._finisher.finish, self.d.reporter.emit)

    async def _door(
        self, request: Request, model_name: str, metadata: dict[str, Any] | None, tenant: str
    ) -> tuple[RequestTags, NodeInfo, ModelEntry]:
        """Who asks, for which model, and may they now (raises the refusals)."""
        if self._waiter.no_leader.is_set():
            raise self._no_leader()
        tags = read_tags(request.headers, metadata)
        info = await self.d.directory.tenant(tenant)
        node = await self.d.directory.resolve(info, tags.app or "default", tags.agent or "default")
        model = await self.d.catalog.require(model_name)
        await self.d.limits.check(info, time.time())
        return tags, node, model

    async def _queue_and_open(
        self, request: Request, flight: Flight
    ) -> aiohttp.ClientResponse | Response:
        await self._submit(flight)
        return await self._run_until_upstream(request, flight)

    # -- door ------------------------------------------------------------------------------

    async def _submit(self, flight: Flight) -> None:
        await submit_flight(self.d, self._waiter, flight, self._abandoner.abandon)

    # -- waiting and opening the worker ----------------------------------------------------

    async def _run_until_upstream(
        self, request: Request, flight: Flight
    ) -> aiohttp.ClientResponse | Response:
        watcher: asyncio.Task[None] | None = None
        try:
            while True:
                if watcher is None and not _in_hand(flight):
                    watcher = asyncio.create_task(_wait_disconnect(request))
                grant = await self._await_grant(flight, watcher)
                if isinstance(grant, Response):
                    return grant
                try:
                    resp = await self._open(flight, grant, watcher)
                except ClientLeft:
                    await self._finisher.finish(flight, "aborted", "client disconnected")
                    return Response(status_code=499)
                except WorkerUnreachable as exc:
                    retry = await self._worker_failed(flight, grant, str(exc))
                    if retry is None:
                        continue
                    return retry
                except WorkerRejected as exc:
                    await self._finisher.finish(flight, "error", _message(exc.body))
                    return JSONResponse(
                        exc.body, status_code=exc.status, headers=flight.response_headers()
                    )
                flight.upstream_ready_at = time.time()
                return resp
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _open(
        self, flight: Flight, grant: Grant, watcher: asyncio.Task[None] | None
    ) -> aiohttp.ClientResponse:
        url = grant.worker_url + _path(flight)
        if flight.read_timeout_s is None:
            return await open_upstream(self.d.http, url, flight.payload)
        assert watcher is not None  # `_in_hand` is False for these
        return await open_unless_left(
            self.d.http, url, flight.payload, flight.read_timeout_s, watcher
        )

    async def _await_grant(
        self, flight: Flight, watcher: asyncio.Task[None] | None
    ) -> Grant | Response:
        fut = flight.grant_future
        assert fut is not None
        if fut.done() and (watcher is None or not watcher.done()):  # granted in its submit
            grant = fut.result()
            flight.grant, flight.granted_at = grant, time.time()
            return grant
        assert watcher is not None  # `_in_hand` is False while the grant is awaited
        timeout = self.d.settings.queue_timeout_s
        outage: asyncio.Task[Any] = asyncio.create_task(self._waiter.no_leader.wait())
        waitables: set[asyncio.Future[Any]] = {fut, watcher, outage}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                slice_s = min(self.d.settings.lost_check_interval_s, deadline - loop.time())
                done, _ = await asyncio.wait(
                    waitables, timeout=max(0.0, slice_s), return_when=asyncio.FIRST_COMPLETED
                )
                if done or loop.time() >= deadline:
                    break
                await resubmit_if_lost(self.d, flight)
        finally:
            outage.cancel()
        if fut in done:
            grant = fut.result()
            flight.grant, flight.granted_at = grant, time.time()
            return grant
        reason = "client_disconnected" if watcher in done else "queue_timeout"
        if outage in done and watcher not in done:
            reason = "no_leader"
        try:
            withdrawn = await self.d.requests.withdraw(
                flight.id, now=time.time(), reason=reason, envelope=flight.envelope
            )
        except StateUnavailable:
            # still queued in Redis: a late grant finds no waiter and is released as an orphan;
            # one the reader delivered during the call has no other way back
            self._waiter.forget(flight.id)
            if fut.done() and not fut.cancelled():
                await self._finisher.release_orphan(
                    fut.result(), error=f"{reason}; Redis unavailable"
                )
            raise self._no_leader() if reason == "no_leader" else unavailable() from None
        if withdrawn:
            self._waiter.forget(flight.id)
            self.d.metrics.withdrawn(reason)
            return given_up(reason, timeout, self._no_leader(), flight.id)
        # granted just as we gave up; the grant is on its way (bounded: Redis may stall again)
        late, _ = await asyncio.wait({fut}, timeout=self.d.settings.no_leader_bound_s())
        if fut not in late:
            self._waiter.forget(flight.id)
            raise self._no_leader()
        grant = fut.result()
        flight.grant, flight.granted_at = grant, time.time()
        if reason != "client_disconnected":
            return grant  # the client is still here (timed out, or no leader seen): serve it
        await self._finisher.finish(flight, "aborted", reason)  # the client left: release the slot
        return Response(status_code=499)

    async def _worker_failed(self, flight: Flight, grant: Grant, why: str) -> Response | None:
        """Requeue once (keeping its place); None means: wait for the next grant."""
        log.warning(
            "worker %s failed request %s before its first token: %s",
            grant.worker_id,
            flight.id,
            why,
        )
        self.d.reporter.emit(WorkerFailed(flight.id, grant.worker_id, why, time.time()))
        flight.attempts += 1
        flight.grant_future = self._waiter.expect(flight.id)
        try:
            requeued = await self.d.requests.requeue(flight.id, now=time.time())
        except StateUnavailable:
            self._waiter.forget(flight.id)
            await self._finisher.finish(flight, "error", f"worker failed: {why}; Redis unavailable")
            err = unavailable()
            err.counted = True  # finished with `error` just above
            raise err from None
        if requeued:
            return None
        self._waiter.forget(flight.id)
        await self._finisher.finish(flight, "error", f"worker failed: {why}")
        raise ApiError(
            503,
            "The worker failed before answering and no retry is left; retry later.",
            code="worker_failed",
            headers={"Retry-After": "1"},
        )

    # -- relaying ---------------------------------------------------------------------------

    def _tokens(self, flight: Flight, now: float) -> None:
        self.d.reporter.progress(flight.id, flight.stats.n_out, now)

    async def _stream(self, flight: Flight, relay: Relay) -> AsyncIterator[bytes]:
        """The client's SSE bytes. The piece read with the worker's `[DONE]` is held until the
        request is finished (`Finisher.finish`: its event and status queued) and then sent
        with `[DONE]` as one `FinalPiece`: the answer's end in one write, after the finish,
        as before."""
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
            worker = flight.grant.worker_id if flight.grant else None
            self.d.reporter.emit(WorkerFailed(flight.id, worker, str(exc), time.time()))
            # what was read with the error (and `[DONE]`) reaches the client before it
            yield b"".join(tail) + error_event(f"The worker failed while streaming: {exc}")
        finally:
            await relay.close()
            await self._finisher.finish(flight, status, error)
        if status == "ok":
            tail.append(DONE)
            yield FinalPiece(b"".join(tail))

    async def _collect(self, flight: Flight, relay: Relay, request: Request) -> Response:
        """The whole answer in one body; a client that leaves first frees the worker (`aborted`)."""
        status, error = "error", None
        collecting = asyncio.ensure_future(relay.collect(flight.chat))
        left = asyncio.ensure_future(_wait_disconnect(request))
        try:
            await asyncio.wait({collecting, left}, return_when=asyncio.FIRST_COMPLETED)
            if not collecting.done():
                status, error = "aborted", "client disconnected"
            else:
                collecting.result()
                status = "ok"
        except (StreamBroken, WorkerUnreachable) as exc:
            status, error = "error", f"worker failed mid-answer: {exc}"
            worker = flight.grant.worker_id if flight.grant else None
            self.d.reporter.emit(WorkerFailed(flight.id, worker, str(exc), time.time()))
        finally:
            await stop_tasks([left, collecting])
            await relay.close()
            await self._finisher.finish(flight, status, error)
        if status == "aborted":
            return Response(status_code=499)
        if error is not None:
            raise ApiError(502, f"The worker failed while answering: {error}", code="worker_failed")
        body = aggregate(
            flight.stats, chat=flight.chat, request_id=flight.id, model=flight.job.model
        )
        return JSONResponse(body, headers=flight.response_headers())

    def _no_leader(self) -> ApiError:
        watch = self._waiter.leader
        waited = watch.seconds_without_leader() if watch is not None else 0.0
        return ApiError(
            503,
            f"No scheduler has been leading for {waited:.0f}s (Redis unreachable or leader "
            "lost), so requests cannot be scheduled; retry shortly.",
            code="scheduler_unavailable",
            headers={"Retry-After": str(NO_LEADER_RETRY_AFTER_S)},
        )


def _in_hand(flight: Flight) -> bool:
    """The grant came with the submit (the fast lane) and the worker answers as it goes (not
    an image generation, which is raced against the client's disconnect): nothing to wait for
    before the worker, so no disconnect watcher before it (a streamed answer's relay has its
    own; a collected one is raced against the disconnect in `_collect`)."""
    fut = flight.grant_future
    return fut is not None and fut.done() and flight.read_timeout_s is None


def _path(flight: Flight) -> str:
    if flight.endpoint is not None:
        return flight.endpoint
    return "/v1/chat/completions" if flight.chat else "/v1/completions"


def _wants(flight: Flight, option: str) -> bool:
    opts = flight.client_stream_options or {}
    return bool(opts.get(option))


def _message(body: dict[str, Any]) -> str:
    err = body.get("error")
    return str(err.get("message")) if isinstance(err, dict) else str(body)


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
