"""The whole path with real processes: two tenants, the official OpenAI client, SQL history."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import httpx
import openai
import pytest

from storage.db import Database
from tests.support.cluster import Cluster


@pytest.fixture
def deployed(cluster: Cluster) -> tuple[Cluster, str, dict[str, str]]:
    keys = cluster.tenants(["alpha", "beta"])
    cluster.start_worker()
    cluster.start_worker()
    cluster.start_scheduler()
    gw = cluster.start_gateway()
    return cluster, gw, keys


def _rows(cluster: Cluster, expected: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    db = Database(cluster.db_url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with db.reader() as r:
                rows = r.requests.list()
            if len(rows) >= expected or time.monotonic() > deadline:
                return [dataclasses.asdict(row) for row in rows]
            time.sleep(0.2)
    finally:
        db.dispose()


def test_two_tenants_stream_and_not(deployed: tuple[Cluster, str, dict[str, str]]) -> None:
    cluster, gw, keys = deployed
    a = openai.OpenAI(base_url=f"{gw}/v1", api_key=keys["alpha"])
    b = openai.OpenAI(base_url=f"{gw}/v1", api_key=keys["beta"])
    assert [m.id for m in a.models.list().data] == ["tiny-llama"]

    chat = a.chat.completions.create(
        model="tiny-llama",
        messages=[{"role": "user", "content": "What is 2+2?"}],
        max_tokens=12,
        extra_body={"ignore_eos": True},
        extra_headers={"X-Arbiter-App": "math-app", "X-Arbiter-Agent": "solver"},
    )
    assert chat.choices[0].message.content
    assert chat.usage is not None and chat.usage.completion_tokens == 12
    assert chat.usage.prompt_tokens > 0

    stream = b.completions.create(
        model="tiny-llama",
        prompt="Once upon a time",
        max_tokens=7,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    text_chunks = [c for c in chunks if c.choices]
    assert len(text_chunks) == 7
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 7

    raw = httpx.post(
        f"{gw}/v1/chat/completions",
        headers={"Authorization": f"Bearer {keys['beta']}", "X-Arbiter-Workflow": "wf-fixed"},
        json={
            "model": "tiny-llama",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3,
            "metadata": {"agent": "greeter"},
        },
        timeout=30,
    )
    assert raw.status_code == 200
    assert raw.headers["X-Arbiter-Workflow"] == "wf-fixed"
    assert raw.headers["X-Arbiter-Request-Id"].startswith("req-")
    assert float(raw.headers["X-Arbiter-Queue-Ms"]) >= 0

    rows = _rows(cluster, 3)
    assert len(rows) == 3
    by_tenant = {r["tenant"]: r for r in rows if r["tenant"] == "alpha"}
    alpha = by_tenant["alpha"]
    assert (alpha["app"], alpha["agent"], alpha["n_out"], alpha["status"]) == (
        "math-app",
        "solver",
        12,
        "ok",
    )
    assert alpha["worker"] in {"sim-0", "sim-1"} and alpha["policy"] == "vtc"
    for row in rows:
        assert row["dispatched_at"] is not None and row["first_token_at"] is not None
        assert row["finished_at"] >= row["first_token_at"] >= row["dispatched_at"]
    greeter = next(r for r in rows if r["agent"] == "greeter")
    assert greeter["workflow"] == "wf-fixed"

    usage_a = httpx.get(f"{gw}/v1/usage", headers={"Authorization": f"Bearer {keys['alpha']}"})
    usage_b = httpx.get(f"{gw}/v1/usage", headers={"Authorization": f"Bearer {keys['beta']}"})
    assert usage_a.json()["tenant"] == "alpha" and usage_a.json()["requests"] == 1
    assert usage_a.json()["completion_tokens"] == 12
    assert usage_b.json()["requests"] == 2 and usage_b.json()["completion_tokens"] == 10
