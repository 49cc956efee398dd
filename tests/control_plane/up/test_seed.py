"""`arbiter up` forgets the workers an earlier run registered and this one does not start, in
SQL (with an audit row) and in Redis, and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from control_plane.state import StateStores
from control_plane.up.seed import register_workers, retire_workers
from storage.db import Database


def _worker(i: int) -> dict[str, Any]:
    return {
        "id": f"sim-{i}",
        "url": f"http://127.0.0.1:{40000 + i}",
        "kind": "sim",
        "model": "tiny-llama",
        "profile": "tiny-cpu",
        "max_num_seqs": 8,
    }


async def test_workers_of_an_earlier_run_not_started_now_are_forgotten(
    redis_url: str, tmp_path: Path
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    db.migrate()
    stores = StateStores.open(redis_url, "local")
    try:
        await register_workers(db, stores, [_worker(i) for i in range(4)])
        gone = await retire_workers(db, stores, ["sim-2", "sim-3", "never-registered"])
        assert gone == ["sim-2", "sim-3"]
        assert [w.id for w in await stores.workers.list()] == ["sim-0", "sim-1"]
        with db.reader() as r:
            assert sorted(w.id for w in r.workers.list()) == ["sim-0", "sim-1"]
            audit = r.audit.list(action="worker.delete")
        assert sorted(a.target for a in audit) == ["worker:sim-2", "worker:sim-3"]
        assert {a.actor for a in audit} == {"arbiter up"}
    finally:
        await stores.aclose()
        db.dispose()
