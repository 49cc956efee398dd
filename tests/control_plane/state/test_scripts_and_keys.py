"""Lua script hygiene, NOSCRIPT re-registration, and the single key prefix."""

from __future__ import annotations

import re

import pytest
from redis.asyncio import Redis

from control_plane.contracts.events import Complete
from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.state import KeySpace, StateStores
from control_plane.state.scripts import Scripts, script_names, script_sha, script_source
from tests.support.envelopes import envelope

NOW = 1_700_000_000.0


@pytest.mark.parametrize("name", script_names())
def test_every_script_documents_keys_argv_and_return_and_reads_no_clock(name: str) -> None:
    source = script_source(name)
    header = "\n".join(line for line in source.splitlines() if line.startswith("--"))
    used_keys = set(re.findall(r"KEYS\[(\d+)\]", source.replace(header, "")))
    used_args = set(re.findall(r"ARGV\[(\d+)\]", source.replace(header, "")))

    assert header.startswith(f"-- {name}:"), "first line names the script and its purpose"
    assert "Returns" in header
    for index in used_keys:
        assert f"KEYS[{index}]" in header, f"KEYS[{index}] undocumented"
    for index in used_args:
        assert f"ARGV[{index}]" in header, f"ARGV[{index}] undocumented"
    assert not re.search(r"call\(\s*['\"]time['\"]", source, re.I), "time comes through ARGV"


def test_the_expected_scripts_are_shipped() -> None:
    assert {"submit", "grant", "withdraw", "requeue", "finish", "lease_acquire"} <= set(
        script_names()
    )


async def test_scripts_are_reloaded_after_script_flush(stores: StateStores, redis: Redis) -> None:
    shas = await Scripts(redis).load_all()
    assert shas == {name: script_sha(name) for name in script_names()}
    assert all(await redis.script_exists(*shas.values()))

    await redis.script_flush()
    assert not any(await redis.script_exists(*shas.values()))

    result = await stores.requests.submit(
        envelope("r1"), request_id="r1", tenant="a", gateway_id="gw", queue_cap=5, now=NOW
    )
    assert result.accepted
    assert (await redis.script_exists(script_sha("submit"))) == [True]
    assert await stores.requests.grant("r1", worker_id="w", worker_url="u", now=NOW)


def test_keyspace_rejects_cluster_names_that_would_break_the_hash_tag() -> None:
    assert KeySpace("prod-eu.1").prefix == "arb:{prod-eu.1}:"
    for bad in ("", "a}b", "a{b", "a b", "a:b"):
        with pytest.raises(ValueError):
            KeySpace(bad)


async def test_every_key_of_a_full_workload_shares_the_cluster_prefix(
    stores: StateStores, redis: Redis
) -> None:
    requests = stores.requests
    await stores.arrivals.ensure_group()
    await stores.events.ensure_groups()
    for i in range(4):
        await requests.submit(
            envelope(f"r{i}"), request_id=f"r{i}", tenant="a", gateway_id="gw", queue_cap=9, now=NOW
        )
    assert await requests.grant("r0", worker_id="w", worker_url="u", now=NOW)
    assert await requests.grant("r1", worker_id="w", worker_url="u", now=NOW)
    assert await requests.requeue("r1", now=NOW)
    assert await requests.withdraw("r2", now=NOW, reason="gone")
    assert await requests.finish("r0", now=NOW, status="ok")
    await stores.events.publish([Complete("r0", "ok", finished=NOW)])
    assert await stores.lease.acquire("s1", 5, now=NOW)
    await stores.workers.upsert(WorkerEntry("w"))
    await stores.workers.set_metrics("w", WorkerSample(True, NOW, running=1), now=NOW)
    await stores.checkpoints.save("policy", {"x": 1})
    await stores.knobs.set("policy", PluginChoice("vtc"))
    await stores.rate_limiter.allow("a", 1.0, 2.0, NOW)

    keys = [key async for key in redis.scan_iter(count=1000)]

    assert len(keys) >= 18
    assert all(key.startswith("arb:{test}:") for key in keys), keys
