"""Modules the leader would otherwise import in the middle of its term, imported before this
replica seeks the lease.

Rule: `LAZY` names every module that code run by a leader (core, policies, admission,
placement, controller, scheduler) imports inside a function; `warm_imports` imports them all,
off the event loop, before `SchedulerService.run` first waits for the lease.
Guarantee: once it has returned, no import stalls a leader's event loop. `scipy.stats` (the
orchestrator's KDE mode and Wasserstein distance) takes 0.65 s to import on an idle 2-vCPU box
and 1.5–1.8 s beside three busy processes; imported on the loop at a leader's first learned
workflow, it held lease renewals (every TTL/3, the term ending 0.8 × TTL after the last one's
start: with the default TTL of 2 s, a stall from 0.93 s can end it), and a takeover forgets
every open workflow.
"""

from __future__ import annotations

import asyncio
import importlib

LAZY = ("scipy.stats",)


async def warm_imports() -> None:
    """Import every module of `LAZY` in a worker thread (the event loop keeps serving)."""
    for name in LAZY:
        await asyncio.to_thread(importlib.import_module, name)
