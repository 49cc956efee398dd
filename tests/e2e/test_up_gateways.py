"""`arbiter up --gateways 2`: two gateway processes behind the one gateway port.

One real deployment: both processes are supervised children with the admin token and a status
port of their own, each a replica with its own id; requests through the shared port are served
and `/metrics` of either process counts the requests of both. A process killed with kill -9 is
restarted under a fresh id, requests are still served, and the scheduler leader finds the old
replica lost and forgets it, as for a replica on another machine.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from control_plane.state import StateStores
from tests.support.up_process import UpProcess

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BODY = {"model": "tiny-llama", "prompt": "hi", "max_tokens": 4, "ignore_eos": True}
GATEWAYS = ("gateway-0", "gateway-1")


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    proc = UpProcess(tmp_path_factory.mktemp("gws") / ".arbiter", extra_args=["--gateways", "2"])
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


def _id(up: UpProcess, name: str) -> str:
    url = up.children()[name]["health_url"]
    return str(httpx.get(url, timeout=5).json()["gateway_id"])


def _serve(up: UpProcess, n: int) -> None:
    key = next(iter(up.info()["tenants"].values()))
    with httpx.Client(
        base_url=up.gateway_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        for _ in range(n):
            # a new connection each time: the kernel spreads connections, not requests
            resp = client.post("/v1/completions", json=BODY, headers={"Connection": "close"})
            assert resp.status_code == 200, resp.text
            assert resp.json()["usage"]["completion_tokens"] == 4


def _requests_total(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("arbiter_gateway_requests_total{")
    )


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


def test_two_processes_are_two_replicas_behind_one_port(up: UpProcess) -> None:
    info = up.info()
    children = info["children"]
    assert "gateway" not in children and set(GATEWAYS) <= set(children)
    for name in GATEWAYS:
        assert _environ(children[name]["pid"])["ARBITER_ADMIN_TOKEN"] == info["admin_token"]
    ids = {_id(up, name) for name in GATEWAYS}
    assert len(ids) == 2
    _serve(up, 30)
    totals = [_requests_total(children[n]["health_url"].rsplit("/", 1)[0]) for n in GATEWAYS]
    assert totals[0] == totals[1] >= 30  # either process answers for both
    assert _requests_total(up.gateway_url) == totals[0]
    admin = httpx.get(
        f"{up.gateway_url}/admin/tenants",
        headers={"Authorization": f"Bearer {info['admin_token']}"},
        timeout=10,
    )
    assert admin.status_code == 200


def test_a_killed_process_comes_back_as_a_new_replica(up: UpProcess) -> None:
    old = _id(up, "gateway-0")
    pid = up.kill9("gateway-0")
    up.wait_restarted("gateway-0", pid)
    new = _id(up, "gateway-0")
    assert new != old and re.fullmatch(r"gw-[0-9a-f]{6}-p0-[0-9a-f]{8}", new), new
    assert new.rsplit("-", 1)[0] == old.rsplit("-", 1)[0]  # one run's tag
    _serve(up, 10)
    info = up.info()

    async def registered() -> set[str]:
        stores = StateStores.open(info["redis_url"], "local")
        try:
            return set(await stores.gateways.registered())
        finally:
            await stores.aclose()

    deadline = time.monotonic() + 60
    while old in (ids := asyncio.run(registered())) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert old not in ids, "the killed replica was never found lost and forgotten"
    assert new in ids
