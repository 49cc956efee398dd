"""Waiting in async tests for a condition another task brings about."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def until(predicate: Callable[[], bool], timeout_s: float) -> None:
    """Return once `predicate()` holds (polled every 50 ms); fail the test after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)
