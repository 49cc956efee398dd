"""One real vLLM CPU server with the tiny model, shared by every test of a session.

`running_vllm()` yields `(root_url, served_model_name)` of a vLLM OpenAI server started through
Arbiter's own supervisor (`python -m workers.vllm vllm --tiny ...`, a real process). The first
call writes the tiny model into `.models/tiny-llama` (reused while `tiny_model.py` is unchanged)
and starts the server; later calls reuse it; it is stopped (SIGTERM to the supervisor, which
stops vLLM gracefully) when the test process exits. `running_tiny_vlm()` does the same for the
tiny vision-language model (`.models/tiny-vlm`, `workers/vllm/tiny_vlm.py`).

vLLM's interpreter comes from `$ARBITER_VLLM_PYTHON` (set by `make test`), else
`.venv-vllm/bin/python`. Without it the calling test is skipped — unless `CI` is set and
`ARBITER_VLLM_PYTHON` names an interpreter that does not exist, which is a failure.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port, wait_http
from workers.vllm import launch, tiny_vlm

SERVED_MODEL_NAME = launch.TINY_SERVED_NAME
STARTUP_TIMEOUT_S = 240.0
STOP_TIMEOUT_S = 60.0
MODEL_DIR = launch.DEFAULT_TINY_MODEL_DIR
_STAMP = ".source-sha256"


@dataclass
class _Server:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path


_shared: dict[str, _Server] = {}


def vllm_python() -> str:
    """vLLM's interpreter, or skip the calling test (fail in CI when it was promised)."""
    promised = os.environ.get(launch.PYTHON_ENV_VAR)
    python = launch.default_vllm_python()
    if Path(python).exists():
        return python
    message = f"vLLM's interpreter {python} is missing (make vllm-env)"
    if promised and os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def tiny_model_dir(python: str) -> Path:
    """`.models/tiny-llama`, (re)written when missing or written by another `tiny_model.py`."""
    return _written(
        MODEL_DIR, [launch.TINY_MODEL_SCRIPT], lambda out: launch.tiny_model_command(python, out)
    )


def tiny_vlm_dir(python: str) -> Path:
    """`.models/tiny-vlm` (`workers/vllm/tiny_vlm.py`), rewritten as `tiny_model_dir` is."""
    sources = [launch.TINY_MODEL_SCRIPT, Path(tiny_vlm.__file__)]
    return _written(tiny_vlm.DEFAULT_DIR, sources, lambda out: tiny_vlm.command(python, out))


def _written(target: Path, sources: list[Path], command: Callable[[Path], list[str]]) -> Path:
    stamp = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()
    stamp_file = target / _STAMP
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    subprocess.run(command(tmp), check=True, capture_output=True, cwd=launch.REPO_ROOT)
    (tmp / _STAMP).write_text(stamp)
    shutil.rmtree(target, ignore_errors=True)
    try:
        tmp.rename(target)
    except OSError:  # another session renamed its identical copy first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


@contextmanager
def running_vllm() -> Iterator[tuple[str, str]]:
    """Yield `(root_url, served_model_name)` of the session's shared vLLM server."""
    with _running("llm", tiny_model_dir, SERVED_MODEL_NAME) as server:
        yield server


@contextmanager
def running_tiny_vlm() -> Iterator[tuple[str, str]]:
    """Like `running_vllm`, for the tiny vision-language model (`tiny_vlm_dir`)."""
    with _running("vlm", tiny_vlm_dir, tiny_vlm.SERVED_NAME) as server:
        yield server


@contextmanager
def _running(key: str, model_dir: Callable[[str], Path], served: str) -> Iterator[tuple[str, str]]:
    server = _shared.get(key)
    if server is None or server.proc.poll() is not None:
        python = vllm_python()
        server = _shared[key] = _start(model_dir(python), python, served)
    try:
        wait_http(f"{server.url}/health", timeout=STARTUP_TIMEOUT_S)
    except TimeoutError as exc:
        pytest.fail(f"{exc}\n{_tail(server.log)}")
    yield server.url, served


def stop_shared_vllm() -> None:
    """Stop the shared servers (each supervisor stops its vLLM); idempotent."""
    while _shared:
        _stop(_shared.popitem()[1])


def _stop(server: _Server) -> None:
    if server.proc.poll() is not None:
        return
    server.proc.terminate()
    try:
        server.proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
    server.log.unlink(missing_ok=True)


atexit.register(stop_shared_vllm)


def _start(model: Path, python: str, served: str) -> _Server:
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="arbiter-vllm-", suffix=".log")[1])
    cmd = [sys.executable, "-m", "workers.vllm", "vllm", "--model", str(model)]
    cmd += ["--port", str(port), "--python", python, "--served-model-name", served]
    cmd += ["--tiny", "--max-restarts", "2", "--startup-timeout", str(STARTUP_TIMEOUT_S)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=launch.REPO_ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            wait_http(f"{url}/health", timeout=2.0)
            return _Server(proc, url, log)
        except TimeoutError:
            continue
    proc.terminate()
    proc.wait(timeout=STOP_TIMEOUT_S)
    pytest.fail(f"vLLM did not become healthy at {url}\n{_tail(log)}")


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
