"""The model catalog's context lengths: from the active workers, the shortest to plan output
room with, the longest to refuse past (the door refuses what no worker can hold). Before, the
last worker read set both, a drained one's included."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.gateway.directory import RedisModelCatalog
from control_plane.state import StateStores
from storage.db import Database


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[StateStores]:
    s = StateStores.open(redis_url, f"dir-{uuid.uuid4().hex[:8]}")
    yield s
    await s.aclose()


async def _worker(stores: StateStores, wid: str, model: str, length: int | None) -> None:
    await stores.workers.upsert(WorkerEntry(wid, f"http://{wid}", model=model))
    sample = WorkerSample(True, time.time(), models={model: length})
    await stores.workers.set_metrics(wid, sample, time.time())


async def test_contexts_come_from_the_active_workers(stores: StateStores, tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    db.migrate()
    try:
        await _worker(stores, "w1", "m", 32_768)
        await _worker(stores, "w2", "m", 8_192)
        await _worker(stores, "w3", "m", 65_536)
        await stores.workers.set_status("w3", "draining")  # takes no new request
        await _worker(stores, "w4", "old", 4_096)
        await stores.workers.set_status("w4", "draining")  # the only one serving `old`
        await _worker(stores, "w5", "unknown", None)
        await _worker(stores, "w6", "moving", 2_048)
        await stores.workers.set_status("w6", "draining")  # the model moves to w7
        await stores.workers.upsert(WorkerEntry("w7", "http://w7", model="moving"))  # unscraped
        await _worker(stores, "w8", "mixed", 4_096)
        await _worker(stores, "w9", "mixed", None)  # its server does not say
        await stores.workers.upsert(WorkerEntry("w10", "http://w10", model="m"))  # misnamed:
        sample = WorkerSample(True, time.time(), models={"other": 1_024})  # serves `other`
        await stores.workers.set_metrics("w10", sample, time.time())
        served = {e.name: e for e in await RedisModelCatalog(stores, db).served()}
    finally:
        db.dispose()

    def contexts(name: str) -> tuple[int | None, int | None]:
        return served[name].max_model_len, served[name].longest_context

    assert contexts("m") == (8_192, 32_768)  # w10's registered name is not what it serves
    assert contexts("old") == (4_096, 4_096)  # no active worker: the others'
    assert contexts("unknown") == (None, None)
    assert contexts("moving") == (None, None)  # not the draining one's 2048: w7 may hold more
    assert contexts("mixed") == (4_096, None)  # planned within 4096, refused past nothing
