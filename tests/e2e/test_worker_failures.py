"""Worker failures: before the first token the request is re-queued once (keeping its place);
after it the client gets an OpenAI-shaped error event; a dead worker gets no more dispatches.
Also: a queue timeout is an explicit 504, and the recorder can die without losing rows."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import pytest

from storage.db import Database
from storage.records import RequestRecord
from tests.support.cluster import Cluster

BODY = {"model": "tiny-llama", "prompt": "hello", "max_tokens": 6, "ignore_eos": True}


def _row(cluster: Cluster, rid: str) -> RequestRecord:
    db = Database(cluster.db_url)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with db.reader() as r:
                row = r.requests.get(request_id=rid)
            if row is not None:
                return row
            time.sleep(0.2)
        raise AssertionError(f"no SQL row for {rid}")
    finally:
        db.dispose()


def test_failure_before_first_token_is_requeued(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    cluster.extra_env["ARBITER_WORKER_FAILURE_COOLDOWN_S"] = "2.0"
    cluster.start_worker(speed=10.0, extra=["--fail-rate", "1.0"])  # sim-0 answers 500
    cluster.start_worker(speed=10.0)  # sim-1 is fine
    cluster.start_scheduler()
    url = cluster.start_gateway()
    h = {"Authorization": f"Bearer {keys['t']}"}
    served = [
        httpx.post(f"{url}/v1/completions", json=BODY, headers=h, timeout=30) for _ in range(6)
    ]
    assert all(r.status_code == 200 for r in served), [r.text for r in served]
    rows = [_row(cluster, r.headers["X-Arbiter-Request-Id"]) for r in served]
    assert all(row.worker == "sim-1" for row in rows)
    assert rows[0].attempts == 2  # placed on sim-0 first (id order), re-queued


@pytest.mark.parametrize("stream", [True, False])
def test_a_worker_that_dies_in_prefill_after_its_200_gets_the_request_requeued(
    cluster: Cluster, stream: bool
) -> None:
    """vLLM sends its 200 before prefill: a worker that dies then has sent the client nothing,
    so the request is re-queued as if it had failed to answer, not ended with an error (an
    event for a stream, a 502 for a collected answer: the gateway always streams from the
    worker)."""
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=10.0, extra=["--die-after-tokens", "0"])  # sim-0
    cluster.start_worker(speed=10.0)  # sim-1
    cluster.start_scheduler()
    url = cluster.start_gateway()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=keys["t"], max_retries=0, timeout=30)
    raw = client.completions.with_raw_response.create(
        model="tiny-llama", prompt="hello", max_tokens=6, stream=stream,
        extra_body={"ignore_eos": True},
    )  # fmt: skip
    answer: Any = raw.parse()
    chunks = list(answer) if stream else [answer]
    assert "".join(c.choices[0].text for c in chunks if c.choices)  # the answer, from sim-1
    row = _row(cluster, raw.headers["X-Arbiter-Request-Id"])
    assert (row.status, row.worker, row.attempts, row.n_out) == ("ok", "sim-1", 2, 6)


def test_no_retry_left_is_an_explicit_error(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    cluster.extra_env["ARBITER_WORKER_FAILURE_COOLDOWN_S"] = "0.5"
    cluster.start_worker(speed=10.0, extra=["--fail-rate", "1.0"])
    cluster.start_scheduler()
    url = cluster.start_gateway()
    resp = httpx.post(
        f"{url}/v1/completions",
        json=BODY,
        timeout=30,
        headers={"Authorization": f"Bearer {keys['t']}"},
    )
    assert resp.status_code == 503 and resp.json()["error"]["code"] == "worker_failed"
    assert resp.headers["Retry-After"] == "1"


def _stream_until_error(client: openai.OpenAI) -> tuple[int, openai.APIError]:
    """Stream a 50-token completion that must end in an error; → (choices seen, the error)."""
    got = 0
    with pytest.raises(openai.APIError) as err:
        for chunk in client.completions.create(
            model="tiny-llama",
            prompt="story",
            max_tokens=50,
            stream=True,
            extra_body={"ignore_eos": True},
        ):
            got += len(chunk.choices)
    return got, err.value


def test_worker_death_mid_stream_gives_error_event(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=1.0, extra=["--die-after-tokens", "5"])
    cluster.start_scheduler()
    url = cluster.start_gateway()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=keys["t"], max_retries=0)
    got, err = _stream_until_error(client)
    assert 0 < got < 50
    assert "worker failed" in str(err.message).lower()
    cluster.start_worker(speed=10.0)
    time.sleep(1.5)
    ok = httpx.post(
        f"{url}/v1/completions",
        json=BODY,
        timeout=30,
        headers={"Authorization": f"Bearer {keys['t']}"},
    )
    assert ok.status_code == 200
    assert _row(cluster, ok.headers["X-Arbiter-Request-Id"]).worker == "sim-1"


def test_silent_worker_mid_stream_gives_error_event_not_a_hang(cluster: Cluster) -> None:
    """A worker that stops sending mid-stream (frozen, partitioned) fails the request after
    the gateway's idle timeout with an error event, instead of holding it until the client
    gives up."""
    keys = cluster.tenants(["t"])
    cluster.extra_env["ARBITER_UPSTREAM_IDLE_TIMEOUT_S"] = "1.0"
    cluster.start_worker(speed=1.0, extra=["--stall-after-tokens", "3", "--stall-s", "30"])
    cluster.start_scheduler()
    url = cluster.start_gateway()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=keys["t"], max_retries=0, timeout=20)
    started = time.monotonic()
    got, err = _stream_until_error(client)
    assert 0 < got < 50
    assert "worker failed" in str(err.message).lower()
    assert time.monotonic() - started < 15  # the idle timeout, not the 30 s stall


def test_queue_timeout_is_explicit(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    cluster.start_worker(speed=0.05, max_num_seqs=1)  # one slow slot
    cluster.start_scheduler()
    url = cluster.start_gateway(env={"ARBITER_QUEUE_TIMEOUT_S": "1.0"})
    h = {"Authorization": f"Bearer {keys['t']}"}
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            f"{url}/v1/completions",
            json={**BODY, "max_tokens": 200, "stream": True},
            headers=h,
        ) as busy,
    ):
        lines = busy.iter_lines()  # keep it referenced: a dropped iterator closes the stream
        next(lines)
        started = time.monotonic()
        resp = client.post(f"{url}/v1/completions", json=BODY, headers=h)
        waited = time.monotonic() - started
    assert resp.status_code == 504, (waited, resp.headers, resp.text[:300])
    assert resp.json()["error"]["code"] == "queue_timeout"
    assert 0.9 < waited < 5.0
    row = _row(cluster, resp.headers["X-Arbiter-Request-Id"])  # reports count it
    assert (row.status, row.error, row.dispatched_at) == ("timeout", "queue_timeout", None)


def test_recorder_restart_loses_no_rows(cluster: Cluster) -> None:
    keys = cluster.tenants(["t"])
    cluster.extra_env["ARBITER_RECORDER_CLAIM_IDLE_S"] = "2.0"
    cluster.start_worker(speed=20.0)
    recorder = cluster.start_recorder()
    cluster.start_scheduler(with_recorder=False)
    url = cluster.start_gateway()
    h = {"Authorization": f"Bearer {keys['t']}"}
    ids = []
    with httpx.Client(timeout=30) as client:
        for i in range(30):
            if i == 10:
                cluster.kill9(recorder)
            if i == 20:
                cluster.start_recorder()
            resp = client.post(f"{url}/v1/completions", json=BODY, headers=h)
            ids.append(resp.headers["X-Arbiter-Request-Id"])
    db = Database(cluster.db_url)
    deadline = time.monotonic() + 15  # a dead consumer's events are claimed after 2 s idle
    while time.monotonic() < deadline:
        with db.reader() as r:
            rows = r.requests.list(limit=1000)
        if len(rows) >= 30:
            break
        time.sleep(0.5)
    db.dispose()
    assert sorted(row.id for row in rows) == sorted(ids)
