"""The tiny vision-language model, served by real vLLM CPU, counts images as the registry's rule.

The model directory is valid for transformers (config, processor, chat template) and the same
seed writes the same bytes. Served by vLLM (dummy weights), each image part of a chat request
costs exactly `image_tokens(VLM_RULE, w, h)` of `usage.prompt_tokens` — below `min_pixels`,
in range, above `max_pixels`, odd aspect ratios, several images in one request. Through a real
gateway, with the model registered as `kind: vlm` by the admin API and the vLLM server as a
`vllm` worker, the gateway's estimate agrees with vLLM's usage within 5 % once images are most
of the prompt (a short text part is estimated at 4 characters per token, which the tiny
byte-level tokenizer does not match), and the recorded input is vLLM's count.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from control_plane.gateway.schemas import ChatCompletionRequest
from control_plane.gateway.tokens import estimate_prompt_tokens
from storage.db import Database
from storage.records import RequestRecord
from tests.support.cluster import Cluster
from tests.support.vllm_server import running_tiny_vlm, vllm_python
from tests.workers.engine.test_vision import data_url
from workers.engine.vision import ImageTokenRule, image_tokens
from workers.vllm import tiny_vlm

pytestmark = pytest.mark.vllm
REPO = Path(__file__).resolve().parents[3]
RULE = ImageTokenRule.model_validate(tiny_vlm.VLM_RULE)
TEXT = "What do these images show?"
SIZES = [(28, 28), (56, 56), (224, 224), (448, 448), (640, 480), (300, 100), (1024, 768)]
"""Below min_pixels (upscaled), in range, above max_pixels (downscaled), a 3:1 strip."""

INSPECT = r"""
import json, sys
from PIL import Image
from transformers import AutoConfig, AutoProcessor
d = sys.argv[1]
cfg = AutoConfig.from_pretrained(d)
proc = AutoProcessor.from_pretrained(d)
msgs = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]}]
chat = proc.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
grids = {}
for w, h in [(56, 56), (640, 480), (1024, 768)]:
    out = proc(text=[chat], images=[Image.new("RGB", (w, h))], return_tensors="pt")
    grids[f"{w}x{h}"] = [out["image_grid_thw"][0].tolist(), out["input_ids"].shape[1]]
print(json.dumps({
    "class": type(cfg).__name__, "head_dim": cfg.text_config.head_dim,
    "vision_patch": cfg.vision_config.patch_size, "merge": cfg.vision_config.spatial_merge_size,
    "image_token": proc.image_token, "chat": chat, "grids": grids,
    "chat_ids": len(proc.tokenizer(chat)["input_ids"]),
}))
"""


def write(python: str, out: Path, *args: str) -> Path:
    cmd = [sys.executable, "-m", "workers.vllm", "tiny-vlm", "--out", str(out)]
    subprocess.run([*cmd, "--python", python, *args], cwd=REPO, check=True)
    return out


@pytest.fixture(scope="module")
def python() -> str:
    return vllm_python()


@pytest.fixture(scope="module")
def vlm() -> Iterator[tuple[str, str]]:
    with running_tiny_vlm() as server:
        yield server


def chat(model: str, sizes: list[tuple[int, int]]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": TEXT}]
    parts += [{"type": "image_url", "image_url": {"url": data_url(w, h)}} for w, h in sizes]
    return {"model": model, "messages": [{"role": "user", "content": parts}], "max_tokens": 1}


def prompt_tokens(url: str, body: dict[str, Any]) -> int:
    resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    assert resp.status_code == 200, resp.text
    return int(resp.json()["usage"]["prompt_tokens"])


def test_model_directory_is_valid_and_deterministic(python: str, tmp_path: Path) -> None:
    model = write(python, tmp_path / "a")
    again = write(python, tmp_path / "b")
    names = sorted(p.name for p in model.iterdir())
    assert "preprocessor_config.json" in names and "model.safetensors" not in names
    assert all((model / n).read_bytes() == (again / n).read_bytes() for n in names)
    out = subprocess.run(
        [python, "-c", INSPECT, str(model)], check=True, capture_output=True, text=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["class"] == "PaddleOCRVLConfig" and seen["head_dim"] == 64
    assert (seen["vision_patch"], seen["merge"]) == (14, 2)
    marker = "<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>"
    assert seen["chat"] == f"<|im_start|>user\n{marker}Hi<|im_end|>\n<|im_start|>assistant\n"
    for key, (grid, n_ids) in seen["grids"].items():
        w, h = (int(v) for v in key.split("x"))
        merged = grid[0] * grid[1] * grid[2] // 4
        assert merged + 2 == image_tokens(RULE, w, h), key  # the processor agrees with the rule
        assert n_ids == seen["chat_ids"] - 1 + merged, key  # one placeholder became `merged`


def test_vllm_counts_each_image_as_the_rule(vlm: tuple[str, str]) -> None:
    url, model = vlm
    text_only = prompt_tokens(url, chat(model, []))
    for size in SIZES:
        measured = prompt_tokens(url, chat(model, [size])) - text_only
        assert measured == image_tokens(RULE, *size), size
    several = [(224, 224), (448, 448), (640, 480)]
    measured = prompt_tokens(url, chat(model, several)) - text_only
    assert measured == sum(image_tokens(RULE, w, h) for w, h in several) == 717


def _register(gw: str, token: str, vllm_url: str, model: str) -> ImageTokenRule:
    auth = {"Authorization": f"Bearer {token}"}
    spec = {"kind": "vlm", "hidden_size": 128, "num_layers": 2, "max_model_len": 2048}
    spec |= {"image_tokens": tiny_vlm.VLM_RULE, "reason": "tiny VLM test"}
    assert httpx.put(f"{gw}/admin/models/{model}", json=spec, headers=auth).status_code == 200
    worker = {"url": vllm_url, "id": "vllm-vlm", "model": model, "kind": "vllm", "reason": "t"}
    resp = httpx.post(f"{gw}/admin/workers", json={**worker, "max_num_seqs": 8}, headers=auth)
    assert resp.status_code == 201, resp.text
    models = httpx.get(f"{gw}/admin/models", headers=auth).json()["data"]
    return ImageTokenRule.model_validate(
        next(m for m in models if m["name"] == model)["image_tokens"]
    )


def _recorded(db_url: str, count: int) -> list[RequestRecord]:
    db = Database(db_url)
    deadline, rows = time.monotonic() + 15, []
    while time.monotonic() < deadline and len(rows) < count:
        with db.reader() as r:
            rows = r.requests.list(tenant="t")
        time.sleep(0.2)
    db.dispose()
    return rows


def test_gateway_estimate_matches_vllm_usage(
    vlm: tuple[str, str], redis_url: str, tmp_path: Path
) -> None:
    vllm_url, model = vlm
    cluster = Cluster(redis_url=redis_url, workdir=tmp_path)
    try:
        key = cluster.tenants(["t"])["t"]
        cluster.start_scheduler()
        gw = cluster.start_gateway()
        rule = _register(gw, cluster.admin_token, vllm_url, model)
        client = openai.OpenAI(base_url=f"{gw}/v1", api_key=key, max_retries=0)
        requests = [[(448, 448)], [(640, 480)], [(1024, 768)], [(224, 224), (448, 448), (640, 480)]]
        used = []
        for sizes in requests:
            body = chat(model, sizes)
            out = client.chat.completions.create(**body)
            assert out.usage is not None
            estimate = estimate_prompt_tokens(ChatCompletionRequest.model_validate(body), rule)
            assert abs(estimate - out.usage.prompt_tokens) <= 0.05 * out.usage.prompt_tokens, sizes
            used.append(out.usage.prompt_tokens)
        rows = _recorded(cluster.db_url, len(requests))
        assert sorted(r.n_in for r in rows) == sorted(used)  # charged by vLLM's own count
    finally:
        cluster.stop()
