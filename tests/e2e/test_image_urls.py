"""Hostile image URLs at a real gateway: each is a 400 in OpenAI's shape naming the part, and
nothing is queued for it (the next request is served at once)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from storage.db import Database
from tests.support.cluster import Cluster
from tests.workers.engine.test_vision import data_url

VLM = "qwen2-vl-7b"
PART = "messages[0].content[1].image_url"


def chat(model: str, url: str) -> dict[str, Any]:
    parts = [
        {"type": "text", "text": "What is it?"},
        {"type": "image_url", "image_url": {"url": url}},
    ]
    return {"model": model, "messages": [{"role": "user", "content": parts}], "max_tokens": 2}


@pytest.fixture
def gw(cluster: Cluster) -> tuple[str, dict[str, str]]:
    keys = cluster.tenants(["acme"])
    cluster.start_worker(profile="qwen2-vl-7b-a100", speed=50.0)
    cluster.start_worker()  # tiny-llama: a model the registry gives no image rule
    cluster.start_scheduler()
    url = cluster.start_gateway(env={"ARBITER_IMAGE_HOSTS": '["img.example.com"]'})
    return url, {"Authorization": f"Bearer {keys['acme']}"}


def _refused(gw: str, auth: dict[str, str], model: str, url: str) -> dict[str, Any]:
    resp = httpx.post(f"{gw}/v1/chat/completions", json=chat(model, url), headers=auth, timeout=30)
    assert resp.status_code == 400, (url, resp.status_code, resp.text)
    err: dict[str, Any] = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["param"] == PART and err["code"] == "invalid_image", err
    return err


def test_hostile_image_urls_are_400s_naming_the_part(gw: tuple[str, dict[str, str]]) -> None:
    url, auth = gw
    for hostile in (
        "http://[::1/x.png",  # urlsplit raises: was a 500
        "http://img.example.com]/x.png",
        "http://a\uff03@img.example.com/x.png",  # NFKC-invalid netloc: was a 500
        "http://evil\\@img.example.com/x.png",  # urllib3/requests fetch http://evil/
        "http://evil@img.example.com/x.png",  # userinfo: nothing to send a host
    ):
        _refused(url, auth, VLM, hostile)
    for model in (VLM, "tiny-llama"):  # with or without an image rule
        _refused(url, auth, model, "data:image/png;base64,***")
        _refused(url, auth, model, "data:text/html;base64,PGI+")
    ok = chat(VLM, data_url(64, 64))
    resp = httpx.post(f"{url}/v1/chat/completions", json=ok, headers=auth, timeout=30)
    assert resp.status_code == 200, resp.text


def test_images_past_the_context_are_refused_before_they_are_charged(
    gw: tuple[str, dict[str, str]], cluster: Cluster
) -> None:
    """Three 4000 × 3000 images are 45,000 tokens for a 32,768-token model: before, the
    request queued, took a slot, was refused by the worker and charged its estimate."""
    url, auth = gw
    big = data_url(4000, 3000)
    body = chat(VLM, big)
    body["messages"][0]["content"] += [{"type": "image_url", "image_url": {"url": big}}] * 2
    resp = httpx.post(f"{url}/v1/chat/completions", json=body, headers=auth, timeout=30)
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert (err["param"], err["code"]) == ("messages", "context_length_exceeded")
    ok = httpx.post(f"{url}/v1/chat/completions", json=chat(VLM, big), headers=auth, timeout=30)
    assert ok.status_code == 200, ok.text
    db = Database(cluster.db_url)
    try:
        deadline = time.time() + 15
        while True:
            with db.engine.connect() as conn:
                rows = conn.execute(sa.text("SELECT status FROM requests")).fetchall()
            if rows or time.time() > deadline:
                break
            time.sleep(0.2)
        time.sleep(1.0)  # a row for the refused request would have come first
        with db.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT status FROM requests")).fetchall()
    finally:
        db.dispose()
    assert [r[0] for r in rows] == ["ok"]
