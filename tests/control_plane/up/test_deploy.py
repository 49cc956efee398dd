"""`arbiter up` reports a child that cannot start as its reason (`UpError`, printed in one
block with the child's log), never as a traceback; and it holds its state directory."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from control_plane.up import leftovers
from control_plane.up.children import Child
from control_plane.up.deploy import Deployment, UpOptions
from control_plane.up.errors import UpError
from control_plane.up.leftovers import LeftoversRemain, StateLock
from tests.support.ports import free_port


def test_a_child_that_exits_while_starting_is_an_up_error(tmp_path: Path) -> None:
    dep = Deployment(UpOptions(state_dir=tmp_path), say=print)
    argv = [sys.executable, "-c", "import sys; print('no such model: x'); sys.exit(3)"]
    failing = Child(
        "worker-0", argv, tmp_path / "w.log", health_url=f"http://127.0.0.1:{free_port()}/"
    )
    try:
        with pytest.raises(UpError, match=r"worker-0 exited early:\nno such model: x"):
            dep._spawn(failing, 30)
    finally:
        dep.stop()


def test_a_deployment_holds_its_state_directory_until_stopped(tmp_path: Path) -> None:
    dep = Deployment(UpOptions(state_dir=tmp_path), say=print)
    dep._take_state_dir()
    with pytest.raises(UpError, match="another `arbiter up`"):
        Deployment(UpOptions(state_dir=tmp_path), say=print).start()
    dep.stop()
    StateLock.take(tmp_path).release()


def test_a_leftover_that_survives_sigkill_is_an_up_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(A process in uninterruptible I/O cannot be made here: the cleanup's verdict is.)"""

    def survives(state_dir: Path, say: object) -> list[int]:
        raise LeftoversRemain("could not stop what an earlier `arbiter up` left: redis (pid 7)")

    monkeypatch.setattr(leftovers, "stop_leftovers", survives)
    with pytest.raises(UpError, match="could not stop"):
        Deployment(UpOptions(state_dir=tmp_path), say=print).start()
    StateLock.take(tmp_path).release()  # and the directory is free again


@pytest.mark.parametrize(("setting", "prefix"), [("edge-a", "edge-a"), ("", "gw"), (" ", "gw")])
def test_the_gateways_ids_start_with_arbiter_gateway_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, prefix: str
) -> None:
    """`ARBITER_GATEWAY_ID` names a gateway's replicas under `up` as under `arbiter gateway`
    (it was replaced by `gw`), followed by the run's tag that the health checks look for."""
    monkeypatch.setenv("ARBITER_GATEWAY_ID", setting)
    opts = UpOptions(state_dir=tmp_path, port=free_port())
    (one,) = Deployment(opts, say=print)._gateways().children()
    tagged = one.argv[one.argv.index("--id-prefix") + 1]
    assert re.fullmatch(rf"{prefix}-[0-9a-f]{{6}}", tagged) and one.health_id == f"{tagged}-"
