"""`arbiter up` again over the same state directory, with real deployments.

While one `up` lives, a second is refused in one line naming it (never a second redis-server
over the same AOF). When the first is killed outright (kill -9), its children stop themselves
(each sees the state directory's lock freed: `up/tether.py`), but for one that cannot (here:
stopped), which the next `up` of that directory stops; it then serves on the same port; the
worker it no longer starts is forgotten (its stale entry could name a port another worker has
since). Its Redis requires the generated password. A hang-up (the terminal closed) stops it like
Ctrl-C: every child, exit code 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
import redis

from tests.support.up_process import UpProcess

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BODY = {"model": "tiny-llama", "prompt": "hi", "max_tokens": 4, "ignore_eos": True}


def _gone(pid: int) -> bool:
    """No such process, or only its zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].startswith("Z")
    except OSError:
        return True


def _wait_all_gone(pids: Iterable[int], timeout_s: float) -> None:
    pending = set(pids)
    deadline = time.monotonic() + timeout_s
    while pending := {pid for pid in pending if not _gone(pid)}:
        assert time.monotonic() < deadline, f"still running: {sorted(pending)}"
        time.sleep(0.1)


def _served(up: UpProcess) -> None:
    key = next(iter(up.info()["tenants"].values()))
    resp = httpx.post(
        f"{up.gateway_url}/v1/completions",
        json=BODY,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text


def test_one_up_per_state_directory_and_the_next_cleans_up_after_a_dead_one(
    tmp_path: Path,
) -> None:
    state = tmp_path / ".arbiter"
    first = UpProcess(state)
    third = UpProcess(state, port=first.port, workers=1)
    seen: list[int] = []  # every child's pid, killed at the end whatever happens
    try:
        first.start()
        _served(first)
        assert first.proc is not None
        second = UpProcess(state)
        refused = subprocess.run(
            second.argv(), capture_output=True, text=True, timeout=120, env={**os.environ}
        )
        assert refused.returncode == 1, refused.stdout[-2000:]
        said = " ".join(refused.stdout.split())
        assert f"another `arbiter up` (pid {first.proc.pid}) is running" in said

        left = {name: c["pid"] for name, c in first.children().items()}
        seen.extend(left.values())
        stuck = left.pop("worker-1")
        os.killpg(stuck, signal.SIGSTOP)  # a child that cannot stop itself (hung, stopped)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        _wait_all_gone(left.values(), 60)  # the others end with their up
        assert not _gone(stuck)
        third.start()
        assert _gone(stuck), third.output()  # the next up stops what is left
        said = " ".join(third.output().split())
        assert f"left worker-1 (pid {stuck})" in said
        assert "forgot workers of an earlier run, not started now: sim-1" in said
        _served(third)
        token = {"Authorization": f"Bearer {third.info()['admin_token']}"}
        listed = httpx.get(f"{third.gateway_url}/admin/workers", headers=token, timeout=10)
        assert [w["id"] for w in listed.json()["data"]] == ["sim-0"], listed.text

        url = third.info()["redis_url"]
        stranger = redis.Redis(port=int(url.rsplit(":", 1)[1].split("/")[0]))
        with pytest.raises(redis.AuthenticationError):
            stranger.get("anything")
        stranger.close()

        children = {name: c["pid"] for name, c in third.children().items()}
        seen.extend(children.values())
        assert third.proc is not None
        third.proc.send_signal(signal.SIGHUP)
        assert third.proc.wait(60) == 0
        assert all(_gone(pid) for pid in children.values())
    finally:
        third.stop()
        first.stop()
        for pid in seen:
            if not _gone(pid):
                os.killpg(pid, signal.SIGKILL)
