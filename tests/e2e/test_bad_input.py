"""Bad input gets OpenAI-shaped errors with honest status codes, and priority cannot be forged."""

from __future__ import annotations

import dataclasses
import time

import httpx
import openai
import pytest

from storage.db import Database
from tests.support.cluster import Cluster

CHAT = {"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture
def gw(cluster: Cluster) -> tuple[Cluster, str, dict[str, str]]:
    keys = cluster.tenants(["alpha"])
    cluster.start_worker()
    cluster.start_scheduler()
    return cluster, cluster.start_gateway(), keys


def _error(resp: httpx.Response, status: int) -> dict[str, object]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_auth_errors(gw: tuple[Cluster, str, dict[str, str]]) -> None:
    cluster, url, keys = gw
    _error(httpx.post(f"{url}/v1/chat/completions", json=CHAT), 401)
    err = _error(
        httpx.post(
            f"{url}/v1/chat/completions",
            json=CHAT,
            headers={"Authorization": "Bearer arb-nope-nope-nope"},
        ),
        401,
    )
    assert err["code"] == "invalid_api_key"
    ok = httpx.post(
        f"{url}/v1/chat/completions",
        json=CHAT,
        headers={"Authorization": f"Bearer {keys['alpha']}"},
        timeout=30,
    )
    assert ok.status_code == 200
    db = Database(cluster.db_url)
    with db.repos() as r:
        (key,) = r.keys.list(tenant="alpha")
        r.keys.revoke(key_id=key.id)
    db.dispose()
    time.sleep(2.3)  # the gateway's key cache lives 2 s
    _error(
        httpx.post(
            f"{url}/v1/chat/completions",
            json=CHAT,
            headers={"Authorization": f"Bearer {keys['alpha']}"},
        ),
        401,
    )


def test_body_errors(gw: tuple[Cluster, str, dict[str, str]]) -> None:
    _, url, keys = gw
    h = {"Authorization": f"Bearer {keys['alpha']}"}
    err = _error(
        httpx.post(f"{url}/v1/chat/completions", json={**CHAT, "model": "nope"}, headers=h), 404
    )
    assert err["param"] == "model" and err["code"] == "model_not_found"
    err = _error(
        httpx.post(
            f"{url}/v1/chat/completions",
            content=b"{not json",
            headers={**h, "content-type": "application/json"},
        ),
        400,
    )
    assert "JSON" in str(err["message"])
    err = _error(
        httpx.post(f"{url}/v1/chat/completions", json={"model": "tiny-llama"}, headers=h), 400
    )
    assert err["param"] == "messages"
    err = _error(httpx.post(f"{url}/v1/chat/completions", json={**CHAT, "n": 2}, headers=h), 400)
    assert err["param"] == "n"
    err = _error(
        httpx.post(f"{url}/v1/chat/completions", json={**CHAT, "max_tokens": -1}, headers=h), 400
    )
    assert err["param"] == "max_tokens"
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 2_000_000}]}
    _error(httpx.post(f"{url}/v1/chat/completions", json=big, headers=h), 413)
    err = _error(
        httpx.post(
            f"{url}/v1/chat/completions", json=CHAT, headers={**h, "X-Arbiter-SLO-TTFT-Ms": "-3"}
        ),
        400,
    )
    assert err["param"] == "X-Arbiter-SLO-TTFT-Ms"
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=keys["alpha"], max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:  # as OpenAI and vLLM answer it
        client.chat.completions.create(model="tiny-llama", messages=[], max_tokens=2)
    assert caught.value.status_code == 400 and caught.value.param == "messages"
    _until_context_known(url, h)
    long_prompt = {**CHAT, "max_tokens": 4000}
    err = _error(
        httpx.post(f"{url}/v1/chat/completions", json=long_prompt, headers=h, timeout=30), 400
    )
    assert "2048" in str(err["message"])
    # refused at the door, not by the worker once queued (which answers code null)
    assert (err["code"], err["param"]) == ("context_length_exceeded", "max_tokens")


def _until_context_known(url: str, h: dict[str, str]) -> None:
    """The leader scrapes the worker's context length after it registers; until then the door
    does not know it (and leaves the request to the worker)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        models = httpx.get(f"{url}/v1/models", headers=h, timeout=10).json()["data"]
        if any(m.get("max_model_len") for m in models):
            return
        time.sleep(0.2)
    raise AssertionError(f"no context length known: {models}")


PROMPT = {"model": "tiny-llama", "prompt": "hi", "max_tokens": 2}
BAD_TENANT_INPUT = [
    # (path, body, extra headers, status, param)
    ("chat", CHAT, {"X-Arbiter-Priority": str(2**63)}, 400, "X-Arbiter-Priority"),
    ("chat", CHAT, {"X-Arbiter-Priority": "9" * 26}, 400, "X-Arbiter-Priority"),
    ("chat", CHAT, {"X-Arbiter-Priority": "1001"}, 400, "X-Arbiter-Priority"),
    ("chat", {**CHAT, "metadata": {"priority": 1e30}}, {}, 400, "metadata.priority"),
    ("chat", {**CHAT, "metadata": {"app": "evil\n"}}, {}, 400, "metadata.app"),
    ("chat", CHAT, {"X-Arbiter-SLO-TTFT-Ms": "inf"}, 400, "X-Arbiter-SLO-TTFT-Ms"),
    ("chat", CHAT, {"X-Arbiter-SLO-E2E-Ms": "nan"}, 400, "X-Arbiter-SLO-E2E-Ms"),
    ("chat", {**CHAT, "max_tokens": 1e30}, {}, 400, "max_tokens"),
    ("chat", {**CHAT, "max_tokens": "5"}, {}, 400, "max_tokens"),
    ("chat", {**CHAT, "max_tokens": 2**31}, {}, 400, "max_tokens"),
    ("chat", {**CHAT, "stream": "yes"}, {}, 400, "stream"),
    ("chat", {**CHAT, "stop": [1]}, {}, 400, "stop"),
    ("text", {**PROMPT, "prompt": [100000000000000000000]}, {}, 400, "prompt"),
    ("text", {**PROMPT, "prompt": [-1]}, {}, 400, "prompt"),
    ("text", {**PROMPT, "prompt": [[]]}, {}, 400, "prompt"),
    # vLLM would deserialize a tensor the door cannot count, or re-price images: refused
    ("text", {**PROMPT, "prompt_embeds": "UEsDBAAA"}, {}, 400, "prompt_embeds"),
    ("chat", {**CHAT, "mm_processor_kwargs": {"min_pixels": 1}}, {}, 400, "mm_processor_kwargs"),
]


def test_numbers_and_names_are_bounded_at_the_door(
    gw: tuple[Cluster, str, dict[str, str]],
) -> None:
    cluster, url, keys = gw
    h = {"Authorization": f"Bearer {keys['alpha']}"}
    paths = {"chat": "/v1/chat/completions", "text": "/v1/completions"}
    for path, body, extra, status, param in BAD_TENANT_INPUT:
        resp = httpx.post(f"{url}{paths[path]}", json=body, headers={**h, **extra}, timeout=30)
        err = _error(resp, status)
        assert err["param"] == param, (path, body, extra, err)
    # nothing bad reached the queue: the recorder is alive and records a normal request
    ok = httpx.post(f"{url}/v1/chat/completions", json=CHAT, headers=h, timeout=30)
    assert ok.status_code == 200, ok.text
    rid = ok.headers["X-Arbiter-Request-Id"]
    db = Database(cluster.db_url)
    deadline = time.monotonic() + 10
    row = None
    while row is None and time.monotonic() < deadline:
        with db.reader() as r:
            row = r.requests.get(request_id=rid)
        time.sleep(0.2)
    db.dispose()
    assert row is not None, cluster.logs()


def test_priority_header_cannot_raise_urgency(gw: tuple[Cluster, str, dict[str, str]]) -> None:
    cluster, url, keys = gw
    db = Database(cluster.db_url)
    with db.repos() as r:
        r.tenants.update_tenant(name="alpha", changes={"priority_tier": 5})
    time.sleep(2.3)  # directory cache
    h = {"Authorization": f"Bearer {keys['alpha']}"}
    ids = {}
    for claim in ("0", "9"):
        resp = httpx.post(
            f"{url}/v1/chat/completions",
            json=CHAT,
            timeout=30,
            headers={**h, "X-Arbiter-Priority": claim},
        )
        assert resp.status_code == 200
        ids[claim] = resp.headers["X-Arbiter-Request-Id"]
    deadline = time.monotonic() + 10
    rows: dict[str, object] = {}
    while time.monotonic() < deadline and len(rows) < 2:
        with db.reader() as r:
            rows = {i: r.requests.get(request_id=i) for i in ids.values()}
            rows = {k: v for k, v in rows.items() if v is not None}
        time.sleep(0.2)
    db.dispose()
    priority = {
        claim: dataclasses.asdict(rows[rid])["priority"]  # type: ignore[call-overload]
        for claim, rid in ids.items()
    }
    assert priority == {"0": 5, "9": 9}
