"""Blocking calls made from a load generator's event loop, with cyclic GC kept on that loop.

A load generator abandons `openai` streams on purpose (an SSE error event, a dropped connection,
a client-side bound): their decoders leave `httpx` async generators suspended, and some end up
in reference cycles only the cyclic collector frees. Collected on the loop's thread, they are
closed by asyncio's finalizer hook, on that loop. A collection can also start on a worker
thread (a `to_thread` call's allocations trigger it) and finalize them there, beside the loop:
the one time CI saw it (the fault harness's row read), CPython found such a generator still
executing and reported it as an unraisable exception, which pytest turns into a failed test.
Pausing automatic collection while such a call's worker thread runs keeps collections off it.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_held = 0
_was_enabled = True


async def off_loop(fn: Callable[..., T], *args: object) -> T:
    """`asyncio.to_thread(fn, *args)` with automatic cyclic GC paused while the thread runs.

    Guarantee: no automatic collection runs while any such call is on its worker thread; GC is
    left as it was found once the last overlapping call returns.
    """
    global _held, _was_enabled
    if _held == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _held += 1
    try:
        return await asyncio.to_thread(fn, *args)
    finally:
        _held -= 1
        if _held == 0 and _was_enabled:
            gc.enable()
