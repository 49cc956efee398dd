"""Start the simulated worker as a real process (``python -m workers.sim``) on a free port."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.ports import free_port, wait_http

REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass
class SimServer:
    """A running simulated worker: ``root`` URL, served ``model`` and its process."""

    root: str
    model: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``root`` + ``/v1``)."""
        return f"{self.root}/v1"

    def metrics(self) -> str:
        """The ``/metrics`` text."""
        return httpx.get(f"{self.root}/metrics", timeout=10).text

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        return metric(self.metrics(), name, **labels)

    def log_text(self) -> str:
        """What the process printed so far."""
        return self.log.read_text(errors="replace")


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of metric ``name`` in a Prometheus text exposition: (labels, value)."""
    out: list[tuple[dict[str, str], float]] = []
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        key, value = line.rsplit(" ", 1)
        bare, _, rest = key.partition("{")
        if bare == name:
            out.append((dict(_LABEL.findall(rest)), float(value)))
    return out


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels`` (0.0 when none)."""
    total = 0.0
    for have, value in samples(text, name):
        if all(have.get(k) == v for k, v in labels.items()):
            total += value
    return total


@contextmanager
def running_sim(*args: str, model: str = "tiny-llama") -> Iterator[SimServer]:
    """Run ``python -m workers.sim --port P *args`` until the block ends (then SIGTERM)."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="arbiter-sim-", suffix=".log")[1])
    cmd = [sys.executable, "-m", "workers.sim", "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=out, stderr=out)
    root = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{root}/health", timeout=30)
        yield SimServer(root, model, proc, log)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.unlink(missing_ok=True)
