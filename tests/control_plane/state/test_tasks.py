"""stop_tasks: a lost cancellation is repeated; a bound leaves a task that never ends."""

from __future__ import annotations

import asyncio

from control_plane.state.tasks import stop_tasks


async def test_stop_tasks_ends_a_task_that_swallows_its_cancellation() -> None:
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if swallowed == 0:  # as Python 3.11's wait_for does when a result races it
                    swallowed += 1
                    continue
                raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0.02)
    await asyncio.wait_for(stop_tasks([task], patience_s=0.05), timeout=2)

    assert task.cancelled() and swallowed == 1


async def test_a_bound_returns_the_tasks_that_never_end() -> None:
    deaf_to_cancel = True

    async def deaf() -> None:
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if deaf_to_cancel:
                    continue
                raise

    task = asyncio.create_task(deaf())
    await asyncio.sleep(0.02)
    left = await asyncio.wait_for(stop_tasks([task], patience_s=0.05, within_s=0.3), timeout=2)
    assert left == {task} and not task.done()

    deaf_to_cancel = False  # so the loop can close
    assert await asyncio.wait_for(stop_tasks([task], patience_s=0.05), timeout=2) == set()
    assert task.cancelled()
