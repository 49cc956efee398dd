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
import logging
import time
import uuid
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from control_plane.api.bounds import INT32_MAX
from control_plane.api.errors import ApiError, unavailable
from control_plane.api.schemas import ChatCompletionRequest, CompletionRequest
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.flight import Flight
from control_plane.gateway.grants import Grant, GrantWaiter
from control_plane.gateway.identity import NodeInfo, SloDefaults
from control_plane.gateway.proxy import (
    DONE,
    Relay,
    StreamBroken,
    WorkerRejected,
    WorkerUnreachable,
    aggregate,
    collect_piece,
    error_event,
    open_upstream,
    upstream_payload,
)
from control_plane.gateway.tags import RequestTags, clamp_tier, read_tags, relax, strip_tags
from control_plane.gateway.tokens import estimate_prompt_tokens
from control_plane.policies.job import Job, Slo
from control_plane.state.errors import StateUnavailable

log = logging.getLogger(__name__)
Body = ChatCompletionRequest | CompletionRequest
FINISH_RETRY_S = 60.0
"""How long marking a finished request in Redis is retried (its completion event is buffered by
the reporter regardless)."""
NO_LEADER_RETRY_AFTER_S = 2


class Gateway:
    """Serves tenant requests for one gateway replica."""

    def __init__(self, deps: GatewayDeps) -> None:
        self.d = deps
        self._background: set[asyncio.Task[None]] = set()

    @property
    def _waiter(self) -> GrantWaiter:
        assert self.d.waiter is not None, "the app factory wires the grant waiter"
        return self.d.waiter

    async def serve(self, request: Request, body: Body, tenant_name: str) -> Response:
        received = time.time()
        if self._waiter.no_leader.is_set():
            raise self._no_leader()
        tags = read_tags(request.headers, body.metadata)
        tenant = await self.d.directory.tenant(tenant_name)
        node = await self.d.directory.resolve(
            tenant, tags.app or "default", tags.agent or "default"
        )
        model = await self.d.catalog.require(body.model)
        await self.d.limits.check(tenant, time.time())
        flight = self._flight(body, tags, node, model.unit_factor, received)
        await self._submit(flight)
        grant_or_error = await self._run_until_upstream(request, flight)
        if isinstance(grant_or_error, Response):
            return grant_or_error
        relay = grant_or_error
        if body.stream:
            return StreamingResponse(
                self._stream(flight, relay),
                media_type="text/event-stream",
                headers=flight.response_headers(),
            )
        return await self._collect(flight, relay)

    # -- door ------------------------------------------------------------------------------

    def _flight(
        self, body: Body, tags: RequestTags, node: NodeInfo, unit: float, received: float
    ) -> Flight:
        n_in = estimate_prompt_tokens(body)
        max_tokens = body.requested_max_tokens() or self.d.settings.default_max_tokens
        rid = f"req-{uuid.uuid4().hex}"
        job = Job(
            id=rid,
            tenant=node.tenant.name,
            app=node.app,
            agent=node.agent,
            model=body.model,
            arrival=received,
            n_in=n_in,
            max_tokens=max_tokens,
            workflow=tags.workflow or f"wf-{uuid.uuid4().hex[:16]}",
            upstream=tags.upstream,
            task=tags.task,
            tier=clamp_tier(node.tier, tags.priority),
            slo=_slo(node.slo.over(self.d.knobs.slo_defaults), tags),
            unit_factor=unit,
        )
        raw = body.model_dump(exclude_none=True, exclude_unset=True)
        raw["metadata"] = strip_tags(body.metadata)
        options = body.stream_options.model_dump(exclude_none=True) if body.stream_options else None
        return Flight(
            job=job,
            node=node,
            chat=isinstance(body, ChatCompletionRequest),
            payload=upstream_payload(raw, None),
            received_at=received,
            client_stream_options=options,
        )

    async def _submit(self, flight: Flight) -> None:
        fut = self._waiter.expect(flight.id)
        flight.grant_future = fut
        envelope = {
            "job": flight.job.to_json(),
            "weights": flight.node.weights(),
            "gateway": self.d.gateway_id,
        }
        flight.envelope = envelope
        cap = (
            flight.node.tenant.queue_cap
            or self.d.knobs.queue_cap_default
            or self.d.settings.default_queue_cap
        )
        try:
            result = await self.d.requests.submit(
                envelope,
                request_id=flight.id,
                tenant=flight.job.tenant,
                gateway_id=self.d.gateway_id,
                queue_cap=cap,
                now=time.time(),
            )
        except BaseException:
            self._waiter.forget(flight.id)
            raise
        flight.submitted_at = time.time()
        if not result.accepted:
            self._waiter.forget(flight.id)
            self.d.metrics.refused("queue_full")
            raise ApiError(
                429,
                f"Tenant {flight.job.tenant!r} has {result.depth} requests queued "
                f"(cap {cap}); retry later.",
                code="queue_full",
                headers={"Retry-After": "1"},
            )

    # -- waiting and opening the worker ----------------------------------------------------

    async def _run_until_upstream(self, request: Request, flight: Flight) -> Relay | Response:
        watcher = asyncio.create_task(_wait_disconnect(request))
        try:
            while True:
                grant = await self._await_grant(flight, watcher)
                if isinstance(grant, Response):
                    return grant
                try:
                    resp = await open_upstream(
                        self.d.http, grant.worker_url + _path(flight), flight.payload
                    )
                except WorkerUnreachable as exc:
                    retry = await self._worker_failed(flight, grant, str(exc))
                    if retry is None:
                        continue
                    return retry
                except WorkerRejected as exc:
                    await self._finish(flight, "error", _message(exc.body))
                    return JSONResponse(
                        exc.body, status_code=exc.status, headers=flight.response_headers()
                    )
                flight.upstream_ready_at = time.time()
                return Relay(
                    resp,
                    flight.stats,
                    lambda n, t: self._tokens(flight, t),
                    want_usage=_wants(flight, "include_usage"),
                    want_continuous=_wants(flight, "continuous_usage_stats"),
                )
        finally:
            watcher.cancel()

    async def _await_grant(self, flight: Flight, watcher: asyncio.Task[None]) -> Grant | Response:
        fut = flight.grant_future
        assert fut is not None
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
                await self._resubmit_if_lost(flight)
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
            withdrawn = await self.d.requests.withdraw(flight.id, now=time.time(), reason=reason)
        except StateUnavailable:
            # still queued in Redis: a late grant finds no waiter and is released as an orphan
            self._waiter.forget(flight.id)
            raise self._no_leader() if reason == "no_leader" else unavailable() from None
        if withdrawn:
            self._waiter.forget(flight.id)
            self.d.metrics.withdrawn(reason)
            return _gave_up(reason, timeout, self._no_leader())
        # granted just as we gave up; the grant is on its way (bounded: Redis may stall again)
        late, _ = await asyncio.wait({fut}, timeout=self.d.settings.no_leader_bound_s())
        if fut not in late:
            self._waiter.forget(flight.id)
            raise self._no_leader()
        grant = fut.result()
        flight.grant, flight.granted_at = grant, time.time()
        if reason == "queue_timeout":
            return grant  # the client is still here: serve it
        await self._finish(flight, "aborted", reason)  # the client left: release the slot
        return Response(status_code=499)

    async def _resubmit_if_lost(self, flight: Flight) -> None:
        """Submit a waiting request again when Redis no longer knows it (a restarted Redis
        lost the last writes before it died). Safe: with no record there is no grant either
        (a grant and its record change in one script), and only this gateway contacts a
        worker for it. Its place in the queue is lost; outages are left to the leader watch."""
        try:
            if await self.d.requests.status(flight.id) is not None or flight.envelope is None:
                return
            await self.d.requests.submit(
                flight.envelope,
                request_id=flight.id,
                tenant=flight.job.tenant,
                gateway_id=self.d.gateway_id,
                queue_cap=INT32_MAX,  # accepted once already: the door's cap does not apply
                now=time.time(),
            )
        except StateUnavailable:
            return
        log.warning("request %s was lost by Redis while queued; submitted again", flight.id)

    async def _worker_failed(self, flight: Flight, grant: Grant, why: str) -> Response | None:
        """Requeue once (keeping its place); None means: wait for the next grant."""
        log.warning(
            "worker %s failed request %s before its first token: %s",
            grant.worker_id,
            flight.id,
            why,
        )
        self.d.reporter.emit(
            {
                "type": "worker_failed",
                "id": flight.id,
                "worker": grant.worker_id,
                "reason": why,
                "t": time.time(),
            }
        )
        flight.attempts += 1
        flight.grant_future = self._waiter.expect(flight.id)
        try:
            requeued = await self.d.requests.requeue(flight.id, now=time.time())
        except StateUnavailable:
            self._waiter.forget(flight.id)
            await self._finish(flight, "error", f"worker failed: {why}; Redis unavailable")
            raise
        if requeued:
            return None
        self._waiter.forget(flight.id)
        await self._finish(flight, "error", f"worker failed: {why}")
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
        status: str = "aborted"
        error: str | None = "client disconnected"
        try:
            async for chunk in relay.chunks():
                data = relay.encode(chunk)
                if data is not None:
                    yield data
            yield DONE
            status, error = "ok", None
        except (StreamBroken, WorkerUnreachable) as exc:
            status, error = "error", f"worker failed mid-stream: {exc}"
            self.d.reporter.emit(
                {
                    "type": "worker_failed",
                    "id": flight.id,
                    "worker": flight.grant.worker_id if flight.grant else None,
                    "reason": str(exc),
                    "t": time.time(),
                }
            )
            yield error_event(f"The worker failed while streaming: {exc}")
        finally:
            await relay.close()
            await self._finish(flight, status, error)

    async def _collect(self, flight: Flight, relay: Relay) -> Response:
        status, error = "error", None
        try:
            async for chunk in relay.chunks():
                collect_piece(chunk, flight.stats, flight.chat)
            status = "ok"
        except (StreamBroken, WorkerUnreachable) as exc:
            error = f"worker failed mid-answer: {exc}"
        finally:
            await relay.close()
            await self._finish(flight, status, error)
        if error is not None:
            raise ApiError(502, f"The worker failed while answering: {error}", code="worker_failed")
        body = aggregate(
            flight.stats, chat=flight.chat, request_id=flight.id, model=flight.job.model
        )
        return JSONResponse(body, headers=flight.response_headers())

    async def _finish(self, flight: Flight, status: str, error: str | None) -> None:
        if flight.finished:
            return
        flight.finished = True
        if flight.stats.finished_at is None:
            flight.stats.finished_at = time.time()
        self.d.reporter.emit(flight.completion_event(status, error))
        self.d.metrics.completed(flight, status)
        # off the response path: the client's answer does not wait for these round trips
        self._in_background(self._mark_finished(flight.id, status))
        if flight.node.tenant.token_budget is not None:
            self._in_background(self._charge(flight))

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _mark_finished(self, request_id: str, status: str) -> None:
        """Retried with backoff for `FINISH_RETRY_S`: an outage delays it, rarely loses it."""
        delay, deadline = 0.25, time.monotonic() + FINISH_RETRY_S
        while True:
            try:
                await self.d.requests.finish(request_id, now=time.time(), status=status)
                return
            except StateUnavailable:
                if time.monotonic() + delay > deadline:
                    log.warning("could not mark %s finished in Redis (it expires)", request_id)
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

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

    async def _charge(self, flight: Flight) -> None:
        """Count the tokens the request consumed against its tenant's daily budget."""
        stats = flight.stats
        n_in = stats.n_in if stats.n_in is not None else flight.job.n_in
        try:
            await self.d.limits.charge(flight.node.tenant, n_in + stats.n_out, time.time())
        except StateUnavailable:
            log.warning("could not count the tokens of %s in Redis (usage undercounted)", flight.id)

    async def release_orphan(self, grant: Grant) -> None:
        """A grant arrived for a request this gateway no longer serves: release it."""
        await self.d.requests.finish(grant.request_id, now=time.time(), status="aborted")
        self.d.reporter.emit(
            {
                "type": "complete",
                "id": grant.request_id,
                "status": "aborted",
                "error": "client gone before grant",
                "orphan": True,
                "worker": grant.worker_id,
                "finished": time.time(),
                "n_in": 0,
                "n_out": 0,
            }
        )


def _gave_up(reason: str, timeout: float, no_leader: ApiError) -> Response:
    """The answer to a request withdrawn from the queue (raised when it is an error)."""
    if reason == "queue_timeout":
        raise ApiError(
            504,
            f"Request waited {timeout:.0f}s in the queue without being scheduled; retry later.",
            code="queue_timeout",
            headers={"Retry-After": "5"},
        )
    if reason == "no_leader":
        raise no_leader
    return Response(status_code=499)


def _slo(defaults: SloDefaults, tags: RequestTags) -> Slo:
    def sec(ms: float | None) -> float | None:
        return None if ms is None else ms / 1000.0

    return Slo(
        ttft_s=sec(relax(defaults.ttft_ms, tags.slo_ttft_ms)),
        tpot_s=sec(relax(defaults.tpot_ms, tags.slo_tpot_ms)),
        e2e_s=sec(relax(defaults.e2e_ms, tags.slo_e2e_ms)),
    )


def _path(flight: Flight) -> str:
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
