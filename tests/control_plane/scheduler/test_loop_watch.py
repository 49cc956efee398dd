"""The loop watch sees a blocked event loop: the delay is observed and, past `warn_s`,
logged with its length."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import pytest

from control_plane.scheduler.loop_watch import watch_loop


async def test_a_blocked_loop_is_observed_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[float] = []
    watch = asyncio.create_task(watch_loop(seen.append, period_s=0.05, warn_s=0.2))
    await asyncio.sleep(0.12)  # a few quiet timers
    time.sleep(0.3)  # noqa: ASYNC251 -- blocks the loop, as a synchronous import does
    with caplog.at_level(logging.WARNING, "control_plane.scheduler.loop_watch"):
        await asyncio.sleep(0.1)
    watch.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watch
    assert max(seen) >= 0.25
    assert any(late >= 0.2 for late in seen)
    assert "the event loop was blocked for 0." in caplog.text
