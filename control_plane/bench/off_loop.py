"""Blocking calls made from a load generator's event loop, with cyclic GC kept on that loop.

A load generator abandons `openai` streams on purpose (an SSE error event, a dropped connection,
a client-side bound): their decoders leave `httpx` async generators suspended, and some end up
in reference cycles only the cyclic collector frees. Collected on the loop's thread, asyncio's
finalizer hook closes them there. Collected on a worker thread (a collection triggered by a
`to_thread` call's allocations) they are finalized beside the loop's own clean-up of the same
stream, and CPython reports "async generator already executing" as an unraisable exception:
noise that pytest turns into a failed test (seen once in CI, in the fault harness's row read).
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
