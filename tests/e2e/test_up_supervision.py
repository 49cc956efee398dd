"""`arbiter up` supervises its children and keeps its secrets.

One real deployment (redis-server, 2 simulated workers, the recorder, 2 schedulers, the
gateway): up.json is 0600 and names every child; only the gateway's environment holds the
admin token; the banner does not print it. Then a worker, the scheduler leader, the recorder,
the gateway and redis-server are each killed with kill -9: each is restarted (the reason is
printed and its restart count is in up.json), requests are served again on the same gateway
port without anyone doing anything, and every request that was answered has its SQL row.
Ctrl-C (SIGTERM) then stops everything, and nothing is restarted.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from storage.db import Database
from tests.support.up_process import UpProcess

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BODY = {"model": "tiny-llama", "prompt": "hi", "max_tokens": 8, "ignore_eos": True}
# a restarted recorder is a new consumer: it takes over the dead one's unacknowledged events
# once they have been idle this long (30 s by default)
CLAIM_IDLE_S = 3.0
ANSWERED: list[str] = []  # ids of the requests answered 200, in this module


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    proc = UpProcess(
        tmp_path_factory.mktemp("up") / ".arbiter",
        env={"ARBITER_RECORDER_CLAIM_IDLE_S": str(CLAIM_IDLE_S)},
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.stop()


def served(up: UpProcess, n: int = 10, timeout_s: float = 60.0) -> float:
    """Seconds until `n` requests in a row answer 200 (retrying while the deployment heals)."""
    key = next(iter(up.info()["tenants"].values()))
    headers = {"Authorization": f"Bearer {key}"}
    began = time.monotonic()
    in_a_row, last = 0, ""
    with httpx.Client(base_url=up.gateway_url, headers=headers, timeout=30) as client:
        while in_a_row < n:
            if time.monotonic() - began > timeout_s:
                raise AssertionError(f"not served within {timeout_s}s (last: {last})")
            try:
                resp = client.post("/v1/completions", json=BODY)
                ok = resp.status_code == 200 and resp.json()["usage"]["completion_tokens"] == 8
                if ok:
                    ANSWERED.append(resp.headers["X-Arbiter-Request-Id"])
                in_a_row, last = (in_a_row + 1, "") if ok else (0, resp.text[:200])
            except httpx.HTTPError as exc:
                in_a_row, last = 0, repr(exc)
            if not in_a_row:
                time.sleep(0.2)
    return time.monotonic() - began


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


def test_secrets_are_kept(up: UpProcess) -> None:
    assert stat.S_IMODE(up.state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((up.state_dir / "up.json").stat().st_mode) == 0o600
    info = up.info()
    children = info["children"]
    expected = {"redis", "worker-0", "worker-1", "recorder", "scheduler-0", "scheduler-1"}
    assert set(children) == {*expected, "gateway"}
    assert environ(children["gateway"]["pid"])["ARBITER_ADMIN_TOKEN"] == info["admin_token"]
    for name in expected:
        assert "ARBITER_ADMIN_TOKEN" not in environ(children[name]["pid"]), name
    assert info["admin_token"] not in up.output()
    assert "up.json" in up.output()


@pytest.mark.parametrize("victim", ["worker-0", "leader", "recorder", "gateway", "redis"])
def test_a_killed_child_is_restarted_and_requests_are_served_again(
    up: UpProcess, victim: str
) -> None:
    served(up)
    name = up.scheduler_leader() if victim == "leader" else victim
    before = up.children()[name]["restarts"]
    pid = up.kill9(name)
    killed = time.monotonic()
    new_pid = up.wait_restarted(name, pid)
    healed = served(up) + (time.monotonic() - killed)
    print(f"\n{name} killed: restarted as pid {new_pid}; 10 requests served {healed:.1f}s after")
    child = up.children()[name]
    assert child["restarts"] == before + 1
    assert child["last_exit"] == "killed by SIGKILL"
    assert f"{name} (pid {pid}) exited: killed by SIGKILL; restarting in" in up.output()


def test_every_answered_request_has_its_row(up: UpProcess) -> None:
    assert len(ANSWERED) >= 50
    db = Database(up.db_url)
    deadline = time.monotonic() + 4 * CLAIM_IDLE_S + 10
    try:
        while True:
            with db.reader() as r:
                missing = [rid for rid in ANSWERED if r.requests.get(request_id=rid) is None]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        db.dispose()
    assert not missing, f"{len(missing)} of {len(ANSWERED)} answered requests have no row"


def test_sigterm_stops_everything_and_restarts_nothing(up: UpProcess) -> None:
    children = up.children()
    exits = up.output().count(") exited: ")
    assert up.stop() == 0
    for name, child in children.items():
        assert _gone(child["pid"]), name
    after = up.children()
    assert {n: c["restarts"] for n, c in after.items()} == {
        n: c["restarts"] for n, c in children.items()
    }
    assert all(c["pid"] is None for c in after.values())
    assert up.output().count(") exited: ") == exits


def _gone(pid: int) -> bool:
    """No such process, or only its zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return True
