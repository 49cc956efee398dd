"""The real worker path: gateway + scheduler + a real vLLM CPU server with a tiny local model."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from control_plane.contracts.workers import WorkerEntry
from control_plane.state import StateStores
from storage.db import Database
from storage.records import RequestRecord
from tests.support.cluster import Cluster
from tests.support.vllm_server import running_vllm

pytestmark = pytest.mark.vllm


async def _register(cluster: Cluster, url: str, model: str) -> None:
    stores = StateStores.open(cluster.redis_url, cluster.cluster)
    await stores.workers.upsert(
        WorkerEntry("vllm-0", url, "active", model, "vllm", max_num_seqs=16)
    )
    await stores.aclose()


def test_streamed_answer_through_arbiter_from_real_vllm(cluster: Cluster) -> None:
    with running_vllm() as (vllm_url, model):
        keys = cluster.tenants(["t"])
        asyncio.run(_register(cluster, vllm_url, model))
        cluster.start_scheduler()
        gw = cluster.start_gateway()
        client = openai.OpenAI(base_url=f"{gw}/v1", api_key=keys["t"], max_retries=0)
        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Hello there"}],
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
            extra_headers={"X-Arbiter-App": "real", "X-Arbiter-Agent": "vllm-agent"},
        )
        chunks = list(stream)
        usage = chunks[-1].usage
        assert usage is not None and usage.completion_tokens == 12 and usage.prompt_tokens > 0
        assert any(c.choices and c.choices[0].delta.content for c in chunks)

        db = Database(cluster.db_url)
        deadline = time.monotonic() + 15
        rows: list[RequestRecord] = []
        while time.monotonic() < deadline and not rows:
            with db.reader() as r:
                rows = r.requests.list(tenant="t")
            time.sleep(0.2)
        db.dispose()
        assert len(rows) == 1
        row = rows[0]
        assert (row.status, row.worker, row.n_out, row.app, row.agent) == (
            "ok",
            "vllm-0",
            12,
            "real",
            "vllm-agent",
        )
        assert row.n_in == usage.prompt_tokens
        assert row.ttft_ms is not None and row.ttft_ms > 0
