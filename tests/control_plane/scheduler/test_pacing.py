"""The leader's events pacing: a pause only while nothing is queued, cut short by a wake."""

from __future__ import annotations

import asyncio
import time

from control_plane.scheduler.pacing import EventPacer

LONG_S = 30.0  # a pause this long would time the test out: returning at all is the proof
GAP_S = 0.05
SLACK_S = 0.005  # the loop may run a timer up to its clock resolution early


async def test_a_pause_lasts_the_gap_while_nothing_waits() -> None:
    pacer = EventPacer(GAP_S)
    started = time.monotonic()
    await pacer.pause(waiting=False)
    assert time.monotonic() - started >= GAP_S - SLACK_S


async def test_no_pause_while_a_request_waits() -> None:
    pacer = EventPacer(LONG_S)
    async with asyncio.timeout(5):
        await pacer.pause(waiting=True)


async def test_gap_zero_turns_pacing_off() -> None:
    async with asyncio.timeout(5):
        await EventPacer(0.0).pause(waiting=False)


async def test_a_request_queued_during_the_pause_ends_it() -> None:
    pacer = EventPacer(LONG_S)
    pause = asyncio.create_task(pacer.pause(waiting=False))
    await asyncio.sleep(0.01)
    assert not pause.done()
    pacer.wake()
    async with asyncio.timeout(5):
        await pause


async def test_a_wake_before_the_pause_does_not_shorten_a_later_one() -> None:
    """A wake is about the request queued then; the pause after the read that served it
    starts afresh (it would otherwise never pace again after the first queued request)."""
    pacer = EventPacer(GAP_S)
    pacer.wake()
    started = time.monotonic()
    await pacer.pause(waiting=False)
    assert time.monotonic() - started >= GAP_S - SLACK_S
