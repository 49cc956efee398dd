"""Priming while watching for the client's leaving (`gateway/priming.py`): on the fast lane the
watcher starts late, cancels the prime when the client goes first (`ClientLeft`, relay
closed), leaves a quick prime alone, and never turns a shutdown's cancellation into a leaving.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import pytest
from starlette.requests import Request
from starlette.types import Message

from control_plane.gateway import priming
from control_plane.gateway.priming import prime_unless_left
from control_plane.gateway.proxy import ClientLeft, WorkerUnreachable
from control_plane.gateway.relay import Relay


class Prefill:
    """A relay whose prime ends when `first_output` is set (or raises `failure`)."""

    def __init__(self, failure: BaseException | None = None) -> None:
        self.first_output = asyncio.Event()
        self.failure = failure
        self.closed = 0

    async def prime(self) -> None:
        await self.first_output.wait()
        if self.failure is not None:
            raise self.failure

    async def close(self) -> None:
        self.closed += 1


class Client:
    """An ASGI `receive` whose client leaves when `leave()` is called; counts its waiters."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()
        self.receives = 0

    def leave(self) -> None:
        self.gone.set()

    async def receive(self) -> Message:
        self.receives += 1
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def request(self) -> Request:
        return Request({"type": "http", "method": "POST", "headers": []}, self.receive)


@pytest.fixture(autouse=True)
def quick_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priming, "WATCH_AFTER_S", 0.02)


async def _prime(relay: Prefill, client: Client) -> None:
    await prime_unless_left(cast(Relay, relay), None, client.request())


async def test_a_client_that_leaves_in_a_long_prefill_is_seen_before_the_first_output() -> None:
    relay, client = Prefill(), Client()
    priming_task = asyncio.create_task(_prime(relay, client))
    await asyncio.sleep(0.05)  # past WATCH_AFTER_S: the watcher runs
    client.leave()
    with pytest.raises(ClientLeft):
        await asyncio.wait_for(priming_task, 1.0)
    assert relay.closed == 1  # the worker aborts the request
    assert priming_task.cancelling() == 0  # the client's cancellation was taken back


async def test_a_quick_prime_starts_no_watcher() -> None:
    relay, client = Prefill(), Client()
    relay.first_output.set()
    await _prime(relay, client)
    await asyncio.sleep(0.05)  # the timer, had it not been cancelled, would fire by now
    assert (client.receives, relay.closed) == (0, 0)


@pytest.mark.parametrize("failure", [None, WorkerUnreachable("lost")])
async def test_a_client_that_leaves_as_the_prime_ends_cancels_nothing_after_it(
    failure: BaseException | None,
) -> None:
    """Regression: a watcher done in the turn the prime ended had its callback queued already,
    so it cancelled whatever the request did next (collecting its answer, re-queueing it)."""
    relay, client = Prefill(failure), Client()
    after: list[str] = []

    async def serve() -> None:
        with contextlib.suppress(WorkerUnreachable):
            await _prime(relay, client)
        await asyncio.sleep(0.02)  # what comes next: collecting, re-queueing
        after.append("done")

    serving = asyncio.create_task(serve())
    await asyncio.sleep(0.05)  # the watcher runs
    assert client.receives == 1
    client.leave()
    relay.first_output.set()  # in the same turn
    await asyncio.wait_for(serving, 1.0)
    assert after == ["done"]


async def test_a_shutdown_and_a_leaving_client_together_stay_a_cancellation() -> None:
    relay, client = Prefill(), Client()
    priming_task = asyncio.create_task(_prime(relay, client))
    await asyncio.sleep(0.05)
    client.leave()
    await asyncio.sleep(0)  # the watcher ends and cancels the task
    priming_task.cancel()  # and the shutdown's, before it runs
    with pytest.raises(asyncio.CancelledError):
        await priming_task
    assert relay.closed == 1


async def test_a_shutdown_cancellation_stays_a_cancellation() -> None:
    relay, client = Prefill(), Client()
    priming_task = asyncio.create_task(_prime(relay, client))
    await asyncio.sleep(0.05)
    priming_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await priming_task
    assert relay.closed == 1


@pytest.mark.parametrize("waited", [0.0, 0.05])
async def test_a_failed_prime_closes_the_relay_and_raises_its_failure(waited: float) -> None:
    relay, client = Prefill(WorkerUnreachable("lost")), Client()
    priming_task = asyncio.create_task(_prime(relay, client))
    await asyncio.sleep(waited)
    relay.first_output.set()
    with pytest.raises(WorkerUnreachable):
        await priming_task
    assert relay.closed == 1


async def test_a_queued_request_s_watcher_is_raced_from_the_start() -> None:
    relay, client = Prefill(), Client()
    left: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    priming_task = asyncio.create_task(
        prime_unless_left(cast(Relay, relay), left, client.request())
    )
    await asyncio.sleep(0)
    left.set_result(None)
    with pytest.raises(ClientLeft):
        await asyncio.wait_for(priming_task, 1.0)
    assert relay.closed == 1 and client.receives == 0  # its own watcher, not a late one
