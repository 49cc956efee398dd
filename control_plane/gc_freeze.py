"""Long-lived services keep their start-up heap out of the garbage collector's way.

Rule: once a service has imported everything (the scheduler and the recorder, before their
loops) or also built what it keeps for its whole life (the gateway: its app and clients, after
its lifespan's set-up), `freeze_startup_heap` runs one full collection and
moves every survivor to the interpreter's permanent generation (`gc.freeze`): later
collections, young and full, no longer walk those hundreds of thousands of objects, so the
pauses they add to requests stay short. Guarantee: nothing is freed that would not be
otherwise — frozen objects are only never examined again, and they live for the process's
lifetime anyway, with one exception: a reference cycle among objects alive at the freeze that
is dropped later is never collected (a one-time leak, bounded by the start-up heap; hence the
freeze comes once, at start, not while requests run).
`ARBITER_GC_FREEZE=0` turns it off (to compare).
"""

from __future__ import annotations

import gc
import os


def freeze_startup_heap() -> int:
    """Collect, then freeze what survived; → the number of objects frozen (0 when off)."""
    if os.environ.get("ARBITER_GC_FREEZE", "1") == "0":
        return 0
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
