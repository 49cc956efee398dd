"""Failed authentication over HTTP: random-key floods leave the caches at their cap and cost a
bounded number of SQL queries; past the limit clients get 429 + Retry-After in OpenAI's shape,
while keys the gateway has seen valid keep working from the same IP."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from storage.db import Database
from tests.control_plane.api.admin.served import served
from tests.control_plane.api.gateway_app import gateway

CAP = 300
BURST = 1000
RATE = 5.0
FLOOD = 20_000
CONCURRENCY = 100


class KeyQueries:
    """Counts the SQL statements that read the `api_keys` table (one per key lookup)."""

    def __init__(self, db: Database) -> None:
        self.n = 0
        sa.event.listen(db.engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "api_keys" in statement:
            self.n += 1


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def random_key() -> str:
    return secrets.token_urlsafe(3072)  # 4 KB, as in the reported attack


async def _flood(client: httpx.AsyncClient, n: int) -> Counter[int]:
    statuses: Counter[int] = Counter()
    for _ in range(n // CONCURRENCY):
        batch = [client.get("/v1/models", headers=bearer(random_key())) for _ in range(CONCURRENCY)]
        for resp in await asyncio.gather(*batch):
            statuses[resp.status_code] += 1
            if resp.status_code == 429:
                assert int(resp.headers["retry-after"]) >= 1
    return statuses


@pytest.mark.slow  # 20,000 requests: ~35 s on a loaded 2-core box
async def test_random_key_flood_is_bounded_and_valid_keys_still_work(
    redis_url: str, tmp_path: Path
) -> None:
    async with gateway(
        redis_url,
        tmp_path,
        directory_cache_entries=CAP,
        auth_failures_per_ip=(RATE, BURST),
        auth_failures_global=(RATE, BURST),
    ) as gw:
        queries = KeyQueries(gw.db)
        async with gw.client() as client:
            assert (await client.get("/v1/models", headers=bearer(gw.key))).status_code == 200
            start = time.monotonic()
            statuses = await _flood(client, FLOOD)
            elapsed = time.monotonic() - start
            ok = await client.get("/v1/models", headers=bearer(gw.key))
        sizes = gw.app.state.directory.cache_sizes()

    assert ok.status_code == 200  # the tenant's key still works from the flooding IP
    assert sum(statuses.values()) == FLOOD and set(statuses) == {401, 429}
    # every 401 was one lookup (keys never repeat); every 429 cost no SQL at all
    assert queries.n - 2 == statuses[401]
    assert CAP < statuses[401] <= BURST + RATE * elapsed
    assert sizes["bad_keys"] == CAP, sizes
    assert max(sizes.values()) <= CAP, sizes
    assert len(gw.app.state.auth_limiter) == 1


async def test_limited_client_gets_429_in_openai_shape_over_http(
    redis_url: str, tmp_path: Path
) -> None:
    async with gateway(
        redis_url, tmp_path, auth_failures_per_ip=(0.5, 3), auth_failures_global=(100.0, 1000)
    ) as gw:
        with served(gw.app) as url:
            async with httpx.AsyncClient(base_url=url) as client:
                first = await client.get("/v1/models", headers=bearer(gw.key))
                bad = [await client.get("/v1/models", headers=bearer("x" * 40)) for _ in range(5)]
                again = await client.get("/v1/models", headers=bearer(gw.key))
                queries = KeyQueries(gw.db)
                for _ in range(20):
                    refused = await client.get("/v1/models", headers=bearer(random_key()))
                    assert refused.status_code == 429
                metrics = (await client.get("/metrics")).text

    assert first.status_code == 200 and again.status_code == 200
    assert [r.status_code for r in bad] == [401, 401, 401, 429, 429]
    assert bad[0].json()["error"]["code"] == "invalid_api_key"
    error = bad[3].json()["error"]
    assert error["code"] == "too_many_auth_failures" and error["type"] == "rate_limit_error"
    assert set(error) == {"message", "type", "param", "code"}
    assert bad[3].headers["retry-after"] == "2"  # 1 token at 0.5/s
    assert queries.n == 0  # refused before any lookup
    assert 'arbiter_gateway_rejected_total{reason="invalid_api_key"} 3.0' in metrics
    assert 'arbiter_gateway_rejected_total{reason="too_many_auth_failures"} 22.0' in metrics


async def test_repeated_bad_key_costs_one_query_and_other_ips_are_unaffected(
    redis_url: str, tmp_path: Path
) -> None:
    async with gateway(
        redis_url, tmp_path, auth_failures_per_ip=(0.01, 5), auth_failures_global=(100.0, 1000)
    ) as gw:
        queries = KeyQueries(gw.db)
        bad = bearer("arb-" + "y" * 40)
        async with gw.client("10.0.0.1") as attacker, gw.client("10.0.0.2") as other:
            codes = [(await attacker.get("/v1/models", headers=bad)).status_code for _ in range(8)]
            other_bad = await other.get("/v1/models", headers=bad)
            fresh_valid = await other.get("/v1/models", headers=bearer(gw.key))
            short = await other.get("/v1/models", headers=bearer("short"))

    assert codes == [401] * 5 + [429] * 3
    assert other_bad.status_code == 401 and short.status_code == 401
    assert fresh_valid.status_code == 200
    assert queries.n == 2  # the bad key once (then negatively cached), the valid key once


async def test_unseen_valid_key_waits_out_a_global_attack_then_works(
    redis_url: str, tmp_path: Path
) -> None:
    async with gateway(
        redis_url, tmp_path, auth_failures_per_ip=(100.0, 1000), auth_failures_global=(2.0, 4)
    ) as gw:
        # Fail from new IPs until the global bucket refuses: counting a fixed 4 failures let the
        # bucket refill one token (0.5 s at 2/s) on a slow machine before the tenant came.
        codes = []
        for i in range(64):
            async with gw.client(f"10.1.0.{i}") as c:
                codes.append((await c.get("/v1/models", headers=bearer(random_key()))).status_code)
            if codes[-1] == 429:
                break
        async with gw.client("10.2.0.1") as tenant:
            refused = await tenant.get("/v1/models", headers=bearer(gw.key))
            await asyncio.sleep(float(refused.headers["retry-after"]))
            later = await tenant.get("/v1/models", headers=bearer(gw.key))

    assert codes[:4] == [401] * 4 and codes[-1] == 429
    assert refused.status_code == 429  # never seen valid here, and the gateway is over its limit
    assert refused.json()["error"]["code"] == "too_many_auth_failures"
    assert later.status_code == 200


async def test_concurrent_first_calls_with_one_valid_key_cost_one_token(
    redis_url: str, tmp_path: Path
) -> None:
    """32 concurrent first requests with a valid key never seen by this gateway, from one IP
    whose bucket holds 5: they share one charged lookup, so all 32 are served."""
    async with gateway(
        redis_url, tmp_path, auth_failures_per_ip=(0.01, 5), auth_failures_global=(0.01, 5)
    ) as gw:
        async with gw.client() as client:
            calls = [client.get("/v1/models", headers=bearer(gw.key)) for _ in range(32)]
            codes = [r.status_code for r in await asyncio.gather(*calls)]
        charging = gw.app.state.auth_charging

    assert codes == [200] * 32
    assert not charging  # nothing left behind once the lookups ended
