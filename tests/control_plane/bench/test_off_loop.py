"""`off_loop`: blocking calls off the event loop with no cyclic collection on the worker thread."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from control_plane.bench.off_loop import off_loop


def _state() -> tuple[bool, str]:
    return gc.isenabled(), threading.current_thread().name


def test_runs_on_a_worker_thread_with_gc_paused_and_restores_it() -> None:
    assert gc.isenabled()
    enabled, thread = asyncio.run(off_loop(_state))
    assert not enabled
    assert thread != threading.current_thread().name
    assert gc.isenabled()


def test_overlapping_calls_keep_gc_paused_until_the_last_returns() -> None:
    release = threading.Event()
    seen: list[bool] = []

    def slow() -> None:
        release.wait(5)
        seen.append(gc.isenabled())

    def quick() -> None:
        seen.append(gc.isenabled())

    async def main() -> None:
        held = asyncio.create_task(off_loop(slow))
        await off_loop(quick)
        assert not gc.isenabled()  # `slow` still runs
        release.set()
        await held

    asyncio.run(main())
    assert seen == [False, False]
    assert gc.isenabled()


def test_leaves_gc_disabled_when_it_was_found_disabled() -> None:
    gc.disable()
    try:
        asyncio.run(off_loop(_state))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_exception_still_restores_gc() -> None:
    def boom() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(off_loop(boom))
    assert gc.isenabled()
