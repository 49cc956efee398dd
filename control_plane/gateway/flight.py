"""One request's life inside a gateway: identity, timings and the completion event it produces."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from control_plane.contracts.events import Complete, Sender
from control_plane.contracts.grants import Grant
from control_plane.contracts.requests import Envelope
from control_plane.core.job import Job
from control_plane.gateway.identity import NodeInfo
from control_plane.gateway.relay import StreamStats


@dataclass(slots=True)
class Flight:
    """Mutable per-request state kept by the gateway while it serves one client."""

    job: Job
    node: NodeInfo
    chat: bool
    payload: dict[str, Any]
    received_at: float
    submitted_at: float = 0.0
    grant: Grant | None = None
    granted_at: float | None = None
    upstream_ready_at: float | None = None
    attempts: int = 0
    stats: StreamStats = field(default_factory=StreamStats)
    finished: bool = False
    grant_future: asyncio.Future[Grant] | None = None
    client_stream_options: dict[str, Any] | None = None
    envelope: Envelope | None = None
    """What was submitted to Redis (kept to submit it again if Redis loses it)."""
    endpoint: str | None = None
    """The worker's path when not a completion (`/v1/images/generations`)."""
    images: int | None = None
    """Images the worker generated (image requests)."""
    read_timeout_s: float | None = None
    """The worker's longest silence for this request (None: the gateway's idle bound)."""
    debug_timing: bool = False
    """The client sent `X-Arbiter-Debug-Timing: 1`: answer with the hop stamps."""
    fast: bool = False
    """Granted on the fast lane (a slot the leader lent), in the submit script itself."""
    liveness_epoch: int = 0
    """The replica's `Liveness.epoch` when the request was submitted."""

    @property
    def id(self) -> str:
        return self.job.id

    def queue_ms(self) -> float:
        end = self.granted_at if self.granted_at is not None else time.time()
        return max(0.0, (end - self.submitted_at) * 1000.0)

    def overhead_ms(self) -> float:
        """Time spent in Arbiter itself before the answer starts: door + dispatch hop."""
        door = self.submitted_at - self.received_at
        hop = (self.upstream_ready_at or time.time()) - (self.granted_at or self.submitted_at)
        return max(0.0, (door + hop) * 1000.0)

    def response_headers(self) -> dict[str, str]:
        headers = {
            "X-Arbiter-Request-Id": self.id,
            "X-Arbiter-Workflow": self.job.workflow or "",
            "X-Arbiter-Queue-Ms": f"{self.queue_ms():.2f}",
            "X-Arbiter-Overhead-Ms": f"{self.overhead_ms():.2f}",
        }
        if self.debug_timing:
            headers["X-Arbiter-Timing"] = self.timing()
        return headers

    def timing(self) -> str:
        """The request's hop stamps (epoch seconds, this host's clock): handler entered,
        envelope in Redis, the scheduler's grant call, grant received, worker answered; on
        the fast lane the grant is the submit script's own (`decided` = `submitted`), and
        `fast=1` says so. Only the caller's own request, no other tenant's, so it is safe to
        hand out."""
        decided = self.grant.granted_at if self.grant else None
        stamps = {
            "received": self.received_at,
            "submitted": self.submitted_at,
            "decided": self.submitted_at if self.fast else decided,
            "granted": self.granted_at,
            "upstream": self.upstream_ready_at,
            "fast": 1.0 if self.fast else None,
        }
        return ";".join(f"{k}={v:.6f}" if k != "fast" else "fast=1" for k, v in stamps.items() if v)

    def completion_event(self, status: str, error: str | None = None) -> Complete:
        """The `complete` event: everything the scheduler and the recorder need."""
        job, stats = self.job, self.stats
        n_in = stats.n_in if stats.n_in is not None else job.n_in
        return Complete(
            id=job.id,
            status=status,
            error=error,
            sender=Sender.of(job),
            arrival=self.received_at,
            dispatched=self.granted_at,
            first_token=stats.first_token_at,
            finished=stats.finished_at or time.time(),
            n_in=n_in,
            n_in_est=job.n_in,
            n_out=stats.n_out,
            worker=self.grant.worker_id if self.grant else None,
            policy=self.grant.policy if self.grant else None,
            attempts=self.attempts,
            finish_reason=stats.finish_reason,
            images=self.images,
        )


def orphan_event(grant: Grant, now: float, error: str = "client gone before grant") -> Complete:
    """The `complete` event of a grant nobody waited for (the client left first, or its submit
    failed without an answer): the gateway released it unserved."""
    return Complete(
        id=grant.request_id,
        status="aborted",
        error=error,
        orphan=True,
        worker=grant.worker_id,
        finished=now,
    )


def unsent_event(grant: Grant, envelope: Envelope, now: float, error: str) -> Complete:
    """The `complete` event of a slot taken (fast lane) or granted (leader) for a submit whose
    answer never came (the gateway released it unserved): the request as submitted, so that
    the recorder writes its row — status `error` (its client had a 503), never dispatched, as
    its withdrawal would be had the submit queued it."""
    job = envelope.job
    return Complete(
        id=grant.request_id,
        status="error",
        error=error,
        sender=Sender.of(job),
        arrival=job.arrival,
        n_in=job.n_in,
        n_in_est=job.n_in,
        worker=grant.worker_id,
        finished=now,
    )
