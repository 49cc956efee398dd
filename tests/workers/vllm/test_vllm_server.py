"""The real vLLM CPU server with the tiny model, started and supervised by Arbiter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.ports import free_port, wait_http
from tests.support.vllm_server import running_vllm, tiny_model_dir, vllm_python

pytestmark = pytest.mark.vllm
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def vllm() -> Iterator[tuple[str, str]]:
    with running_vllm() as server:
        yield server


def stream_chat(url: str, model: str, max_tokens: int) -> list[dict[str, Any]]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say something about fair queues."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    chunks = []
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


def test_streamed_chat_completion_reports_usage(vllm: tuple[str, str]) -> None:
    url, model = vllm
    chunks = stream_chat(url, model, max_tokens=12)
    tokens = [c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")]
    final = chunks[-1]
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 12
    prompt_tokens = final["usage"]["prompt_tokens"]
    assert final["usage"]["total_tokens"] == prompt_tokens + 12
    # continuous usage: every token chunk carries the running count
    counts = [c["usage"]["completion_tokens"] for c in chunks if c["choices"] and c.get("usage")]
    assert counts == sorted(counts) and counts[-1] == 12
    assert 1 <= len(tokens) <= 12
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert all(c["model"] == model for c in chunks)


def test_metrics_use_vllm_names(vllm: tuple[str, str]) -> None:
    url, model = vllm
    stream_chat(url, model, max_tokens=4)
    text = httpx.get(f"{url}/metrics", timeout=10).text
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_count",
    ):
        lines = [ln for ln in text.splitlines() if ln.startswith(name + "{")]
        assert any(f'model_name="{model}"' in ln for ln in lines), name
    generated = [ln for ln in text.splitlines() if ln.startswith("vllm:generation_tokens_total")]
    assert float(generated[0].rsplit(" ", 1)[1]) >= 4


def test_models_lists_the_served_name(vllm: tuple[str, str]) -> None:
    url, model = vllm
    data = httpx.get(f"{url}/v1/models", timeout=10).json()["data"]
    assert [m["id"] for m in data] == [model]
    assert data[0]["max_model_len"] == 2048


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


@pytest.mark.slow
def test_supervisor_restarts_killed_vllm_serving_written_weights(tmp_path: Path) -> None:
    python = vllm_python()
    model, port = tiny_model_dir(python), free_port()
    cmd = [sys.executable, "-m", "workers.vllm", "vllm", "--model", str(model), "--port", str(port)]
    cmd += ["--python", python, "--backoff", "0.5", "--", "--enforce-eager", "--max-model-len"]
    log = (tmp_path / "sup.log").open("wb")
    sup = subprocess.Popen([*cmd, "2048"], cwd=REPO, stdout=log, stderr=log)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=240)
        (first,) = _children(sup.pid)
        os.kill(first, signal.SIGKILL)  # vLLM's API server dies; its engine is left orphaned
        wait_http(f"http://127.0.0.1:{port}/health", timeout=240)
        (second,) = _children(sup.pid)
        assert second != first
        body = {"model": str(model), "prompt": "Hello", "max_tokens": 3, "ignore_eos": True}
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=60)
        assert answer.json()["usage"]["completion_tokens"] == 3
    finally:
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=90) == 0
        log.close()
    assert "restart 1 in 0.5 s" in (tmp_path / "sup.log").read_text()
