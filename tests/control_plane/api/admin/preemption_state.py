"""A live view whose workers report preemption counters, written as a scheduler leader does:
the real core's workers observe scrapes, and `live_view` publishes them."""

from __future__ import annotations

from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.ledger import Ledger
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.views import live_view
from control_plane.scheduler.workers import observe, sync_workers
from control_plane.state import StateStores


async def publish_preemptions(stores: StateStores, counts: dict[str, int], now: float) -> None:
    """Publish a live view of workers `counts` (id → cumulative preemptions), leader
    'leader-test', updated at `now`."""
    core = build_core({"policy": PluginChoice("fcfs")}, Ledger(), "fcfs")
    entries = [WorkerEntry(id=w, url=f"http://127.0.0.1:9/{w}", model="m") for w in counts]
    sync_workers(core, entries)
    for worker, total in counts.items():
        observe(core, worker, WorkerSample(True, now, preemptions_total=float(total)))
    await stores.checkpoints.save_live(live_view(core, "leader-test", now))
