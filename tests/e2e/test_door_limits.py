"""Per-tenant door limits with real processes: the daily token budget and the request rate.

Both refuse with 429 in OpenAI's shape and a `Retry-After`, leave other tenants alone, and never
lose or cut off a request they accepted.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import openai
import pytest

from control_plane.state.budget import seconds_to_next_day
from storage.db import Database
from storage.records import RequestRecord
from tests.support.cluster import Cluster

MODEL = "tiny-llama"
PROMPT = "hello there"
MAX_TOKENS = 40
BUDGET = 150
BODY = {"model": MODEL, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "ignore_eos": True}


@pytest.fixture(autouse=True)
def _clear_of_midnight() -> None:
    """A budget test must not straddle 00:00 UTC (the day's usage restarts from zero there)."""
    left = seconds_to_next_day(time.time())
    if left < 60:
        time.sleep(left + 1)


def _set_limits(cluster: Cluster, tenant: str, **changes: Any) -> None:
    db = Database(cluster.db_url)
    with db.repos() as r:
        r.tenants.update_tenant(name=tenant, changes=changes)
    db.dispose()


def _deploy(cluster: Cluster, limited: str, **limits: Any) -> tuple[str, dict[str, str]]:
    keys = cluster.tenants([limited, "other"])
    _set_limits(cluster, limited, **limits)  # before the gateway starts: no cache to outwait
    cluster.start_worker()
    cluster.start_scheduler()
    return cluster.start_gateway(), keys


def _client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=60)


def _complete(client: openai.OpenAI, *, stream: bool) -> int:
    """One request; the total tokens its usage reports."""
    extra: dict[str, Any] = {"ignore_eos": True}
    if not stream:
        r = client.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=MAX_TOKENS, extra_body=extra
        )
        assert r.usage is not None and r.usage.completion_tokens == MAX_TOKENS
        return r.usage.total_tokens
    chunks = list(
        client.completions.create(
            model=MODEL,
            prompt=PROMPT,
            max_tokens=MAX_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
    )
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == MAX_TOKENS
    return usage.total_tokens


def _usage(url: str, key: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/usage", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _wait_counted(url: str, key: str, tokens: int) -> dict[str, Any]:
    """Usage is counted off the response path: wait until the gateway has counted `tokens`."""
    deadline = time.monotonic() + 10
    while True:
        usage = _usage(url, key)
        if usage["tokens_today"] >= tokens or time.monotonic() > deadline:
            return usage
        time.sleep(0.05)


def _rows(cluster: Cluster, tenant: str, want: int) -> list[RequestRecord]:
    db = Database(cluster.db_url)
    try:
        deadline = time.monotonic() + 15
        while True:
            with db.reader() as r:
                rows = r.requests.list(tenant=tenant, limit=1000)
            if len(rows) >= want or time.monotonic() > deadline:
                return rows
            time.sleep(0.2)
    finally:
        db.dispose()


def _assert_refused(exc: openai.APIStatusError, code: str) -> int:
    """An OpenAI-shaped 429 with `code`; its Retry-After in seconds."""
    assert exc.status_code == 429
    body = exc.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "rate_limit_error"
    assert body["error"]["code"] == code == exc.code
    return int(exc.response.headers["Retry-After"])


def test_token_budget_refuses_once_used_up_until_utc_midnight(cluster: Cluster) -> None:
    url, keys = _deploy(cluster, "t", token_budget=BUDGET)
    client = _client(url, keys["t"])
    assert _usage(url, keys["t"])["token_budget"] == BUDGET

    used, served = 0, 0
    while used < BUDGET:  # every request is admitted while the day's usage is under budget
        _wait_counted(url, keys["t"], used)
        used += _complete(client, stream=served % 2 == 1)
        served += 1
    assert served >= 2
    assert _wait_counted(url, keys["t"], used)["tokens_today"] == used

    with pytest.raises(openai.RateLimitError) as refused:
        _complete(client, stream=False)
    retry_after = _assert_refused(refused.value, "token_budget_exceeded")
    assert 1 <= retry_after <= 86_400
    assert abs(retry_after - seconds_to_next_day(time.time())) <= 5
    message = refused.value.response.json()["error"]["message"]
    assert f"{BUDGET} tokens" in message and f"{used} tokens used" in message
    with pytest.raises(openai.RateLimitError):
        _complete(client, stream=True)  # streaming requests are refused the same way

    other = _client(url, keys["other"])
    assert _complete(other, stream=False) > 0  # a tenant without a budget is unaffected
    assert _usage(url, keys["other"])["token_budget"] is None

    rows = _rows(cluster, "t", served)
    assert len(rows) == served and all(r.status == "ok" for r in rows)  # nothing lost or extra
    assert sum(r.n_in + r.n_out for r in rows) == used  # Redis counted what SQL recorded


async def _burst(url: str, key: str, n: int) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(
            *(client.post(f"{url}/v1/completions", json=BODY, headers=headers) for _ in range(n))
        )


def test_requests_accepted_under_budget_finish_even_past_it(cluster: Cluster) -> None:
    url, keys = _deploy(cluster, "t", token_budget=MAX_TOKENS)
    burst = asyncio.run(_burst(url, keys["t"], 4))  # all pass the door before any finishes

    assert [r.status_code for r in burst] == [200] * 4
    assert all(r.json()["usage"]["completion_tokens"] == MAX_TOKENS for r in burst)
    total = sum(r.json()["usage"]["total_tokens"] for r in burst)
    assert _wait_counted(url, keys["t"], total)["tokens_today"] == total > MAX_TOKENS
    with pytest.raises(openai.RateLimitError) as refused:
        _complete(_client(url, keys["t"]), stream=False)
    _assert_refused(refused.value, "token_budget_exceeded")
    assert len(_rows(cluster, "t", 4)) == 4


def test_rate_limit_refuses_a_burst_with_retry_after(cluster: Cluster) -> None:
    url, keys = _deploy(cluster, "t", rate_limit_rps=1.0)  # bucket of 2, refilled at 1/s
    responses = asyncio.run(_burst(url, keys["t"], 8))

    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(ok) + len(refused) == 8, [r.status_code for r in responses]
    assert 2 <= len(ok) <= 4 and refused
    for r in refused:
        assert set(r.json()) == {"error"}
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert r.json()["error"]["code"] == "rate_limit_exceeded"
        assert 1 <= int(r.headers["Retry-After"]) <= 2
    assert all(r.json()["usage"]["completion_tokens"] == MAX_TOKENS for r in ok)

    other = asyncio.run(_burst(url, keys["other"], 8))  # no limit: the whole burst passes
    assert [r.status_code for r in other] == [200] * 8
    time.sleep(int(refused[0].headers["Retry-After"]))
    assert _complete(_client(url, keys["t"]), stream=False) > 0  # the bucket refilled
    rows = _rows(cluster, "t", len(ok) + 1)
    assert len(rows) == len(ok) + 1 and all(r.status == "ok" for r in rows)
