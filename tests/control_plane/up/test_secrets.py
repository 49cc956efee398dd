"""Secrets of `arbiter up`: up.json is 0600 from creation on, the state directory 0700, and a
child sees the admin token only when its own environment carries it."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane.up.children import Child
from control_plane.up.state_files import private_dir, read_json, write_private_json


@pytest.fixture
def loose_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_up_json_is_private_and_replaces_a_readable_one(tmp_path: Path, loose_umask: None) -> None:
    path = tmp_path / "up.json"
    path.write_text("{}")
    assert mode(path) == 0o644
    write_private_json(path, {"admin_token": "secret"})
    assert mode(path) == 0o600
    assert read_json(path) == {"admin_token": "secret"}
    assert [p.name for p in tmp_path.iterdir()] == ["up.json"]  # no temporary file left


def test_the_state_dir_is_private(tmp_path: Path, loose_umask: None) -> None:
    fresh, old = tmp_path / "fresh" / ".arbiter", tmp_path / "old"
    old.mkdir(mode=0o755)
    for d in (fresh, old):
        private_dir(d)
        assert mode(d) == 0o700


def environ(pid: int) -> dict[str, str]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        if raw:
            pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
            return {k.decode(): v.decode() for k, v in pairs}
        time.sleep(0.02)
    raise AssertionError("empty environ")


def test_a_child_gets_the_admin_token_only_when_given_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARBITER_ADMIN_TOKEN", "from-the-operator-shell")
    argv = [sys.executable, "-c", "import time; time.sleep(30)"]
    plain = Child("worker", argv, tmp_path / "w.log", {"ARBITER_REDIS_URL": "redis://x"})
    gateway = Child("gateway", argv, tmp_path / "g.log", {"ARBITER_ADMIN_TOKEN": "tok"})
    try:
        plain.start()
        gateway.start()
        assert plain.proc is not None and gateway.proc is not None
        seen = environ(plain.proc.pid)
        assert "ARBITER_ADMIN_TOKEN" not in seen and seen["ARBITER_REDIS_URL"] == "redis://x"
        assert environ(gateway.proc.pid)["ARBITER_ADMIN_TOKEN"] == "tok"
    finally:
        plain.stop(2.0)
        gateway.stop(2.0)
    assert json.dumps(plain.environment()).count("from-the-operator-shell") == 0
