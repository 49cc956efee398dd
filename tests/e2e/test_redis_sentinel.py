"""Redis fail-over under load: a primary, a replica and three Sentinels; kill -9 the primary.

Every request a client saw complete is recorded exactly once and was served once; a request
that errored was not served; none is left without an answer (0 lost, 0 served twice); the
scheduler leads again on the promoted replica with a larger fencing token.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from control_plane.bench.off_loop import off_loop
from control_plane.state import KeySpace
from storage.db import Database
from tests.support.cluster import Cluster
from tests.support.sentinel import SERVICE, SentinelGroup, sentinel_command

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLIENTS = 24
RUN_S = 14.0
KILL_AT_S = 4.0
MAX_TOKENS = 8
KS = KeySpace("e2e")


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelGroup]:
    if sentinel_command() is None:
        problem = "no redis-sentinel or redis-server (apt-get install redis-sentinel)"
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    group = SentinelGroup(tmp_path / "redis")
    try:
        group.start()
        yield group
    finally:
        group.stop()


async def _client(url: str, key: str, c: int, stop_at: float, out: dict[str, object]) -> None:
    """Sends requests one after another until `stop_at`; records each one's outcome."""
    async with httpx.AsyncClient(timeout=60) as http:
        i = 0
        while time.monotonic() < stop_at:
            tag = f"c{c}-{i}"
            i += 1
            body = {"model": "tiny-llama", "prompt": tag, "max_tokens": MAX_TOKENS}
            body["ignore_eos"] = True
            try:
                resp = await http.post(
                    f"{url}/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"}
                )
            except httpx.HTTPError as exc:
                out[tag] = ("no answer", type(exc).__name__)
                continue
            rid = resp.headers.get("X-Arbiter-Request-Id", "")
            if resp.status_code == 200:
                out[tag] = ("ok", rid, resp.json()["usage"]["completion_tokens"])
            else:
                out[tag] = ("error", rid, resp.status_code, resp.json()["error"]["code"])
                await asyncio.sleep(0.2)  # as a client honouring Retry-After would


def _served(cluster: Cluster) -> int:
    """Requests the workers generated to the end (`vllm:request_success_total`)."""
    total = 0.0
    for worker in cluster.workers:
        for line in httpx.get(f"{worker['url']}/metrics", timeout=10).text.splitlines():
            if line.startswith("vllm:request_success_total"):
                total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _rows(cluster: Cluster, want: int) -> list[tuple[str, str]]:
    db = Database(cluster.db_url)
    deadline = time.monotonic() + 30
    while True:
        with db.reader() as r:
            rows = [(row.id, row.status) for row in r.requests.list(limit=100_000)]
        if sum(s == "ok" for _, s in rows) >= want or time.monotonic() > deadline:
            db.dispose()
            return rows
        time.sleep(0.5)


def _token(group: SentinelGroup) -> int:
    client = group.client()
    try:
        return int(client.hget(KS.leader_info, "token") or 0)
    finally:
        client.close()


def _leader_again(group: SentinelGroup, before: int, timeout_s: float = 30) -> tuple[str, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        client = group.client()
        try:
            holder = client.get(KS.leader)
            token = int(client.hget(KS.leader_info, "token") or 0)
        except Exception:
            holder, token = None, 0
        finally:
            client.close()
        if holder and token > before:
            return str(holder), token
        time.sleep(0.25)
    raise AssertionError(f"no leader with a token above {before} within {timeout_s}s")


def test_sentinel_failover_loses_nothing(sentinels: SentinelGroup, tmp_path: Path) -> None:
    env = {
        "ARBITER_REDIS_SENTINELS": sentinels.addresses,
        "ARBITER_REDIS_SENTINEL_SERVICE": SERVICE,
    }
    cluster = Cluster(redis_url=sentinels.primary_url, workdir=tmp_path, extra_env=env)
    try:
        _run(cluster, sentinels)
    finally:
        cluster.stop()


def _run(cluster: Cluster, group: SentinelGroup) -> None:
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=4.0, max_num_seqs=8)
    cluster.start_worker(speed=4.0, max_num_seqs=8)
    cluster.start_scheduler(name="scheduler-a")
    time.sleep(1.0)  # a leads before b starts
    cluster.start_scheduler(name="scheduler-b", with_recorder=False)
    url = cluster.start_gateway()
    token_before = _token(group)
    out: dict[str, object] = {}

    async def scenario() -> int:
        stop_at = time.monotonic() + RUN_S
        load = [
            asyncio.create_task(_client(url, keys["t"], c, stop_at, out)) for c in range(CLIENTS)
        ]
        await asyncio.sleep(KILL_AT_S)
        old = await off_loop(group.kill9_primary)
        new = await off_loop(group.wait_failover, old)
        await asyncio.gather(*load)
        return new

    started = time.monotonic()
    new_port = asyncio.run(scenario())
    print(f"\nfail-over to :{new_port}; load ran {time.monotonic() - started:.1f}s")
    holder, token_after = _leader_again(group, token_before)
    ok = {v[1]: v for v in out.values() if isinstance(v, tuple) and v[0] == "ok"}
    errors = [v for v in out.values() if isinstance(v, tuple) and v[0] == "error"]
    unanswered = [v for v in out.values() if isinstance(v, tuple) and v[0] == "no answer"]
    rows = _rows(cluster, len(ok))
    per_id = collections.Counter(rid for rid, _ in rows)
    ok_rows = {rid for rid, status in rows if status == "ok"}
    served = _served(cluster)
    error_ids = {v[1] for v in errors if v[1]}
    lost = len(unanswered) + len(set(ok) - ok_rows)
    duplicated = sum(n - 1 for n in per_id.values() if n > 1) + max(0, served - len(ok))
    codes = collections.Counter(f"{v[2]} {v[3]}" for v in errors)
    print(
        f"sent {len(out)}, completed {len(ok)}, errors {len(errors)} {dict(codes)}, "
        f"lost {lost}, duplicated {duplicated}; worker-served {served}; "
        f"leader {holder} token {token_before} -> {token_after}"
    )
    assert lost == 0, (unanswered[:5], sorted(set(ok) - ok_rows)[:5], cluster.logs())
    assert duplicated == 0, (served, len(ok), [i for i, n in per_id.items() if n > 1][:5])
    assert served == len(ok)  # no errored request was served either
    assert not error_ids & ok_rows  # no errored request is recorded as served
    assert all(v[2] == MAX_TOKENS for v in ok.values())
    assert len(ok) > len(out) / 2, codes  # most of the load went through the fail-over
    assert token_after > token_before
