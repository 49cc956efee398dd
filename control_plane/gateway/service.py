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
from collections.abc import Callable
from typing import Any

import aiohttp
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from control_plane.contracts.events import WorkerFailed
from control_plane.contracts.grants import Grant
from control_plane.gateway.abandon import SubmitAbandoner
from control_plane.gateway.answer import Answers, wait_disconnect
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
from control_plane.gateway.priming import prime_unless_left
from control_plane.gateway.proxy import (
    ClientLeft,
    WorkerRejected,
    WorkerUnreachable,
    open_unless_left,
    open_upstream,
)
from control_plane.gateway.relay import Relay
from control_plane.gateway.submit import resubmit_if_lost, submit_flight
from control_plane.gateway.tags import RequestTags, read_tags
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
NO_LEADER_RETRY_AFTER_S = 2
DEBUG_TIMING = "x-arbiter-debug-timing"
"""Request header: `1` adds `X-Arbiter-Timing` (the request's hop stamps) to the answer."""
RelayOf = Callable[[aiohttp.ClientResponse], Relay]


class Gateway:
    """Serves tenant requests for one gateway replica."""

    def __init__(self, deps: GatewayDeps) -> None:
        self.d = deps
        self._finisher = Finisher(deps)
        self._abandoner = SubmitAbandoner(
            deps.requests,
            deps.gateway_id,
            self._finisher.release_unsent,
            self._finisher.release_orphan,
        )
        self.release_orphan = self._abandoner.release_unwaited
        self._answers = Answers(deps, self._finisher.finish)

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
        await self._submit(flight)
        relay_of = functools.partial(self._relay, flight)
        relay = await self._run_until_upstream(request, flight, relay_of)
        if isinstance(relay, Response):
            return relay
        assert isinstance(relay, Relay)
        if body.stream:
            return self._answers.streamed(flight, relay)
        return await self._answers.collect(
            flight, relay, functools.partial(wait_disconnect, request)
        )

    async def serve_images(
        self, request: Request, body: ImageGenerationRequest, tenant_name: str
    ) -> Response:
        """An image generation (`control_plane.gateway.images`), one JSON answer."""
        received = time.time()
        tags, node, model = await self._door(request, body.model, body.metadata, tenant_name)
        flight = build_image_flight(self.d, body, tags, node, model, received)
        await self._submit(flight)
        resp = await self._run_until_upstream(request, flight, None)
        if isinstance(resp, Response):
            return resp
        assert isinstance(resp, aiohttp.ClientResponse)
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

    # -- door ------------------------------------------------------------------------------

    async def _submit(self, flight: Flight) -> None:
        await submit_flight(self.d, self._waiter, flight, self._abandoner.abandon)

    # -- waiting and opening the worker ----------------------------------------------------

    async def _run_until_upstream(
        self, request: Request, flight: Flight, relay_of: RelayOf | None
    ) -> aiohttp.ClientResponse | Relay | Response:
        """Wait for a grant and open its worker (re-queued when the worker fails before
        answering); with `relay_of`, the answer is read up to its first token (`Relay.prime`)
        before anything is sent, so a worker that dies in prefill is a failure before answering
        too. → the worker's response (an image generation), the primed relay, or the answer
        already decided (an error, 499)."""
        watcher: asyncio.Task[None] | None = None
        try:
            while True:
                if watcher is None and not _in_hand(flight):
                    watcher = asyncio.create_task(wait_disconnect(request))
                grant = await self._await_grant(flight, watcher)
                if isinstance(grant, Response):
                    return grant
                if self.d.liveness.suspect(flight.liveness_epoch):
                    await self._still_granted(flight, grant)
                try:
                    opened = await self._open(request, flight, grant, watcher, relay_of)
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
                return opened
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _open(
        self,
        request: Request,
        flight: Flight,
        grant: Grant,
        watcher: asyncio.Task[None] | None,
        relay_of: RelayOf | None,
    ) -> aiohttp.ClientResponse | Relay:
        url = grant.worker_url + _path(flight)
        if flight.read_timeout_s is not None:
            assert watcher is not None  # `_in_hand` is False for these
            resp = await open_unless_left(
                self.d.http, url, flight.payload, flight.read_timeout_s, watcher
            )
            flight.upstream_ready_at = time.time()
            return resp
        resp = await open_upstream(self.d.http, url, flight.payload)
        flight.upstream_ready_at = time.time()
        if relay_of is None:
            return resp
        relay = relay_of(resp)
        await prime_unless_left(relay, watcher, request)
        return relay

    async def _still_granted(self, flight: Flight, grant: Grant) -> None:
        """Raise 503 unless Redis still has the request granted to this replica on `grant`'s
        worker: read after this replica may have been considered lost, a grant may be one the
        leader has released since (opening its worker would over-commit it)."""
        try:
            record = await self.d.requests.get(flight.id)
        except StateUnavailable:
            await self._finisher.finish(flight, "error", "state unavailable")
            err = unavailable()
            err.counted = True  # finished with `error` just above
            raise err from None
        held = (record.status, record.worker, record.gateway) if record else None
        if held == ("granted", grant.worker_id, self.d.gateway_id):
            return
        log.warning("request %s was released while this gateway looked lost", flight.id)
        raise unavailable()

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
                if await resubmit_if_lost(self.d, flight):
                    # ended by the leader: this replica was considered lost meanwhile
                    self._waiter.forget(flight.id)
                    raise unavailable()
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

    def _relay(self, flight: Flight, resp: aiohttp.ClientResponse) -> Relay:
        return Relay(
            resp,
            flight.stats,
            lambda n, t: self.d.reporter.progress(flight.id, flight.stats.n_out, t),
            want_usage=_wants(flight, "include_usage"),
            want_continuous=_wants(flight, "continuous_usage_stats"),
        )

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
    before the worker, so no disconnect watcher before it; the prime starts one late
    (`gateway/priming.py`), and the answer's sender has its own (a streamed answer's in
    `api/hot_path.py`, a collected one's in `Answers.collect`)."""
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
