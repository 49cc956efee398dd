"""The command line's side of telling the running system about a committed tenancy change.

`arbiter admin tenants create|update|delete` work on SQL directly; afterwards they reach the
running system's Redis (`ARBITER_REDIS_URL`, or its Sentinels, and `ARBITER_CLUSTER`; when
`ARBITER_REDIS_URL` is unset and `.arbiter/up.json` names the same database, the Redis and
cluster of that `arbiter up`, which picks a free port for its Redis) to bump
the `directory` knob and, for a weight change or a deletion, make the node's entry of the
`weights` knob the weight SQL holds — as the admin API does (`live_sync`). Redis not
answering within `ANNOUNCE_TIMEOUT_S` is a warning, not a failure: the SQL change has
committed.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from control_plane.admin import tenancy
from control_plane.admin.live_sync import (
    WeightUnsettled,
    bump_directory,
    publish_committed_weight,
)
from control_plane.settings import Settings, SettingsError, load_settings
from control_plane.state import StateStores, StateUnavailable
from control_plane.state.sentinel import sentinel_of
from control_plane.up.state_files import read_json
from storage.db import Database
from storage.engine import normalize_url
from storage.errors import StorageError

ANNOUNCE_TIMEOUT_S = 5.0
UP_JSON = Path(".arbiter") / "up.json"


def announce(
    path: tuple[str, ...], *, database_url: str, weight_changed: bool = False
) -> str | None:
    """Tell the running system of a change made in `database_url`; with `weight_changed`
    (a weight set, or the node deleted) the scheduler gets the node's weight as committed
    there. Returns a warning line when it could not be told."""
    try:
        settings = _of_the_deployment(load_settings(), database_url)
    except SettingsError as exc:
        return f"the running system was not told: {'; '.join(exc.lines)}"
    try:
        asyncio.run(_announce(settings, database_url, path, weight_changed))
    except StorageError as exc:  # the change committed; only its re-read failed
        return f"the scheduler was not told the new weight (database re-read failed: {exc})"
    except WeightUnsettled as exc:
        return f"the scheduler was not told this weight: {exc} (the later changes tell it)"
    except (StateUnavailable, TimeoutError, OSError) as exc:
        reason = str(exc) or f"no answer within {ANNOUNCE_TIMEOUT_S:g} s"
        return (
            f"the running system was not told (Redis of cluster {settings.cluster!r}: {reason}); "
            "gateways see the change within their cache TTL, but the scheduler keeps any "
            "weight set earlier through the admin API until it is told: run again with Redis "
            "reachable, or set the weight with PUT /admin/weights/{node}"
        )
    return None


def _of_the_deployment(settings: Settings, database_url: str) -> Settings:
    """`settings`, or — without `ARBITER_REDIS_URL` — the Redis and cluster of the `arbiter up`
    whose `up.json` names `database_url`."""
    if "ARBITER_REDIS_URL" in os.environ:
        return settings
    up = read_json(UP_JSON)
    named = up.get("database_url")
    if not isinstance(named, str) or normalize_url(named) != normalize_url(database_url):
        return settings
    if not up.get("redis_url"):
        return settings
    return settings.model_copy(
        update={"redis_url": str(up["redis_url"]), "cluster": str(up.get("cluster") or "local")}
    )


async def _announce(
    settings: Settings, database_url: str, path: tuple[str, ...], weight_changed: bool
) -> None:
    stores = StateStores.open(
        settings.redis_url, settings.cluster, sentinel=sentinel_of(settings), multiplex=False
    )
    try:
        db = Database(database_url)
        try:
            async with asyncio.timeout(ANNOUNCE_TIMEOUT_S):
                await bump_directory(stores.knobs, time.time())
                if weight_changed:
                    await publish_committed_weight(stores.knobs, path, _reader(db, path))
        finally:
            db.dispose()
    finally:
        await stores.aclose()


def _reader(db: Database, path: tuple[str, ...]) -> Callable[[], Awaitable[float | None]]:
    async def committed() -> float | None:
        # on the loop itself: a thread would outlive the timeout (asyncio.run then waits for
        # its executor without a bound); a read holds the loop up to the database's own
        # timeouts instead, which the 5 s bound cannot cut (it just answered this command)
        return tenancy.weight_of(db, path)

    return committed
