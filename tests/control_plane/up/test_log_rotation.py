"""`arbiter up`'s logs stay under their limit: copied aside and truncated in place, `keep`
earlier files kept, and a child that writes on through its appending descriptor keeps
writing into the live file (a real process under the real supervisor)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from control_plane.up.children import Child
from control_plane.up.log_rotation import LogLimit, rotate_if_over
from control_plane.up.supervisor import Supervisor


def test_a_log_over_its_limit_moves_aside_and_the_oldest_goes(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    limit = LogLimit(max_bytes=10, keep=2)
    assert not rotate_if_over(log, limit)  # not there yet
    log.write_text("0123456789")
    assert not rotate_if_over(log, limit)  # at the limit, not over it
    for text in ("first rotation", "second rotation", "third rotation"):
        log.write_text(text)
        assert rotate_if_over(log, limit)
        assert log.read_text() == ""
    assert (tmp_path / "worker-0.log.1").read_text() == "third rotation"
    assert (tmp_path / "worker-0.log.2").read_text() == "second rotation"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "worker-0.log",
        "worker-0.log.1",
        "worker-0.log.2",
    ]


@pytest.mark.parametrize(("max_bytes", "keep"), [(0, 3), (10, 0)])
def test_a_limit_that_keeps_nothing_is_refused(max_bytes: int, keep: int) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        LogLimit(max_bytes, keep)


WRITER = """
import sys, time
for i in range(100_000):
    sys.stdout.write(f"line {i:06d} " + "x" * 90 + "\\n")
    sys.stdout.flush()
    time.sleep(0.0005)
"""


def test_a_running_child_s_log_is_kept_under_its_limit(tmp_path: Path) -> None:
    """Before, `<state-dir>/logs` grew without bound under `arbiter up`."""
    log = tmp_path / "chatty.log"
    limit = LogLimit(max_bytes=64 * 1024, keep=2)
    supervisor = Supervisor(say=lambda _: None, logs=limit, logs_every_s=0.1)
    chatty = Child("chatty", [sys.executable, "-c", WRITER], log)
    chatty.start()
    supervisor.add(chatty)
    supervisor.start()
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "chatty.log.2").exists():
            assert time.monotonic() < deadline, sorted(p.name for p in tmp_path.iterdir())
            time.sleep(0.05)
        time.sleep(0.5)
        assert chatty.alive()
        while not (live := log.read_bytes()):  # read just after a truncation: read again
            time.sleep(0.01)
        assert live.startswith(b"line ")  # writing on, from the start of the file
    finally:
        supervisor.stop(grace_s=2.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "chatty.log",
        "chatty.log.1",
        "chatty.log.2",
    ]
    # one check's worth of output over the limit at most (0.1 s of ~100 bytes per 0.5 ms)
    assert all(p.stat().st_size < limit.max_bytes + 64 * 1024 for p in tmp_path.iterdir())
    first = int((tmp_path / "chatty.log.1").read_text().split()[1])
    assert first > 0  # the newer rotated file continues where an older one stopped


def test_a_child_s_tail_reaches_into_the_rotated_log(tmp_path: Path) -> None:
    """The reason a child failed is in its last lines, also right after a rotation."""
    log = tmp_path / "worker-0.log"
    (tmp_path / "worker-0.log.1").write_text("".join(f"old {i}\n" for i in range(30)))
    log.write_text("new 0\nnew 1\n")
    tail = Child("worker-0", ["true"], log).tail(5).splitlines()
    assert tail == ["old 27", "old 28", "old 29", "new 0", "new 1"]
