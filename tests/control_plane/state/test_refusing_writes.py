"""A Redis that answers but refuses writes for a while — its snapshot cannot be saved (a full
disk: `MISCONF`) — is an outage to every store: `StateUnavailable`, so the API answers 503
and readers wait and retry. Before, redis-py's bare `ResponseError` went up as a bug (a 500
`internal_error` on the request path). Against a real redis-server whose snapshot fails
(its folder turned to one where no file can be made), then is saved again."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis

from control_plane.contracts.events import Progress
from control_plane.state import StateStores, StateUnavailable
from tests.control_plane.state.test_outage import NOW
from tests.support.envelopes import envelope
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.skipif(not Path("/proc/1").is_dir(), reason="needs /proc (Linux)")


async def _bgsave_status(client: redis.Redis, wanted: str) -> None:
    client.bgsave()
    for _ in range(200):
        info = client.info("persistence")
        if not info["rdb_bgsave_in_progress"] and info["rdb_last_bgsave_status"] == wanted:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the snapshot never became {wanted!r}")


@pytest.fixture
async def saving_server() -> AsyncIterator[RedisServer]:
    server = RedisServer(args=["--save", "3600 1", "--enable-protected-configs", "yes"])
    server.start()
    yield server
    client = redis.Redis.from_url(server.url)  # a server that cannot save will not stop
    client.config_set("dir", server.workdir)
    client.close()
    server.stop()
    shutil.rmtree(server.workdir, ignore_errors=True)


async def test_writes_refused_for_a_failed_snapshot_are_an_outage(
    saving_server: RedisServer,
) -> None:
    client = redis.Redis.from_url(saving_server.url)
    stores = StateStores.open(saving_server.url, "misconf")
    try:
        await stores.events.ensure_groups()
        client.config_set("dir", "/proc/1")  # no file can be made there
        await _bgsave_status(client, "err")
        with pytest.raises(StateUnavailable, match="MISCONF"):
            await stores.requests.submit(
                envelope("x"), request_id="x", tenant="a", gateway_id="gw", queue_cap=5, now=NOW
            )
        with pytest.raises(StateUnavailable, match="MISCONF"):
            await stores.events.publish([Progress("r1", 1, NOW)])
        assert (await stores.requests.get("x")) is None  # reads still answer
        client.config_set("dir", saving_server.workdir)
        await _bgsave_status(client, "ok")
        result = await stores.requests.submit(
            envelope("x"), request_id="x", tenant="a", gateway_id="gw", queue_cap=5, now=NOW
        )
        assert result.accepted
    finally:
        await stores.aclose()
        client.close()


async def test_writes_refused_inside_a_pipeline_are_an_outage(saving_server: RedisServer) -> None:
    """redis-py raises a pipeline's refused write with a note before Redis's reply ("Command #
    1 (INCRBY …) of pipeline caused error: MISCONF …"), and a MULTI's with EXEC's EXECABORT as
    its cause: the reply under the note decides, as for a command sent alone."""
    client = redis.Redis.from_url(saving_server.url)
    plain = StateStores.open(saving_server.url, "misconf", multiplex=False)
    try:
        await plain.events.ensure_groups()
        client.config_set("dir", "/proc/1")
        await _bgsave_status(client, "err")
        with pytest.raises(StateUnavailable, match="MISCONF"):
            await plain.token_budgets.add("a", 5, NOW)  # MULTI … EXEC
        with pytest.raises(StateUnavailable, match="MISCONF"):
            await plain.events.publish([Progress("r1", 1, NOW)])  # a pipeline, no MULTI
        client.config_set("dir", saving_server.workdir)
        await _bgsave_status(client, "ok")
        assert await plain.token_budgets.add("a", 5, NOW) == 5
    finally:
        await plain.aclose()
        client.close()
