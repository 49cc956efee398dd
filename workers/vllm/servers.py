"""Context managers that run a real vLLM server (supervised) or a simulated worker for a while."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from workers.vllm import launch
from workers.vllm.supervisor import Backoff, VllmSupervisor


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def supervised_vllm(
    python: str,
    model_dir: Path,
    log_file: Path,
    *,
    extra_args: tuple[str, ...] = launch.TINY_CPU_ARGS,
    startup_timeout_s: float = 600.0,
) -> Iterator[str]:
    """Serve `model_dir` as `tiny-llama` with vLLM under a `VllmSupervisor`; yield its root URL.

    The supervisor runs in a background thread without restarts (a death is an error here);
    leaving the block stops vLLM gracefully. Raises RuntimeError, with the log's tail, if vLLM
    is not healthy within `startup_timeout_s`.
    """
    port = free_port()
    root = launch.root_url("127.0.0.1", port)
    command = launch.vllm_command(
        python,
        str(model_dir),
        host="127.0.0.1",
        port=port,
        served_model_name=launch.TINY_SERVED_NAME,
        extra_args=extra_args,
    )
    log_file.write_bytes(b"")
    sup = VllmSupervisor(
        command,
        f"{root}/health",
        env=launch.vllm_env(),
        backoff=Backoff(max_restarts=0),
        startup_timeout_s=startup_timeout_s,
        log_file=log_file,
    )
    thread = threading.Thread(target=sup.run, name="vllm-supervisor", daemon=True)
    thread.start()
    try:
        while not sup.ready.wait(0.5):
            if not thread.is_alive():
                raise RuntimeError(f"vLLM did not start; last log lines:\n{_tail(log_file)}")
        yield root
    finally:
        sup.stop()
        thread.join()


@contextmanager
def running_sim(profile: Path | str, log_file: Path, *, timeout_s: float = 60.0) -> Iterator[str]:
    """Run `python -m workers.sim --profile PROFILE` on a free port; yield its root URL."""
    port = free_port()
    root = launch.root_url("127.0.0.1", port)
    cmd = [sys.executable, "-m", "workers.sim", "--port", str(port), "--profile", str(profile)]
    with log_file.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=launch.REPO_ROOT, stdout=out, stderr=out)
    try:
        _wait_healthy(f"{root}/health", proc, timeout_s, log_file)
        yield root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} not healthy; last log lines:\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
