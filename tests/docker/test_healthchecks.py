"""Every Arbiter container in docker/compose.yaml has a healthcheck that probes a path its role
serves, on the port it listens on, with a command that fails when the answer is not 2xx or
nothing answers; the image itself has none (one image, every role); the build context leaves
out the virtual environments, the models and local state."""

from __future__ import annotations

import fnmatch
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
import yaml
from fastapi.routing import APIRoute

from control_plane.api.health import router as gateway_health
from control_plane.scheduler.main import status_app
from workers.sim.app import ROUTES as SIM_ROUTES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def _arbiter_services() -> dict[str, dict[str, Any]]:
    """The long-running ones: a one-shot step (`migrate`) has nothing to probe."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    return {
        n: s
        for n, s in services.items()
        if s.get("image") == "arbiter:latest" and s.get("restart") != "no"
    }


def _paths(routes: list[Any]) -> set[str]:
    return {r.path for r in routes if isinstance(r, APIRoute)}


def _role_and_port(svc: dict[str, Any]) -> tuple[str, int]:
    """The role a service runs and the port its probe must reach."""
    argv = [str(a) for a in svc.get("entrypoint") or svc["command"]]
    if "streamlit" in argv:
        return "console", int(argv[argv.index("--server.port") + 1])
    role = argv[0]
    if role == "recorder":
        return role, int(svc["environment"]["ARBITER_RECORDER_METRICS_PORT"])
    return role, int(argv[argv.index("--port") + 1])


def _served(role: str) -> set[str]:
    """The paths a role answers without credentials."""
    if role == "gateway":
        return _paths(gateway_health.routes) - {"/metrics"}  # /metrics may need a token
    if role == "scheduler":
        return _paths(status_app(cast(Any, None)).routes)
    if role == "worker":
        return {p for p, (method, _) in SIM_ROUTES.items() if method == "GET"}
    if role == "recorder":
        return {"/metrics"}  # prometheus_client's server: metrics are all it serves
    return {"/_stcore/health"}  # Streamlit's own health endpoint


def _probe(svc: dict[str, Any]) -> tuple[list[str], str]:
    test = [str(t) for t in svc["healthcheck"]["test"]]
    assert test[:3] == ["CMD", "python", "-c"], test
    return test[1:-1], test[-1]


def test_the_image_leaves_the_healthcheck_to_each_deployment() -> None:
    instructions = [line.split()[0] for line in DOCKERFILE.read_text().splitlines() if line.strip()]
    assert "HEALTHCHECK" not in instructions


@pytest.mark.parametrize("name", sorted(_arbiter_services()))
def test_each_container_probes_a_path_its_role_serves_on_its_own_port(name: str) -> None:
    svc = _arbiter_services()[name]
    assert "healthcheck" in svc, f"{name} has no healthcheck"
    role, port = _role_and_port(svc)
    argv, target = _probe(svc)
    assert argv == _probe(_arbiter_services()["gateway-1"])[0]  # the one command run below
    url = urlsplit(target)
    assert (url.hostname, url.port) == ("127.0.0.1", port), (name, url)
    assert url.path in _served(role), (name, role, url.path, _served(role))
    if role == "recorder":  # its metrics server starts only after the migrations
        assert svc["healthcheck"]["start_period"] == "600s"


class _Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/ok" else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_probe_command_passes_on_2xx_and_fails_on_503_or_silence(server: str) -> None:
    argv, _ = _probe(_arbiter_services()["gateway-1"])

    def run(url: str) -> int:
        return subprocess.run([*argv, url], capture_output=True, timeout=30).returncode

    assert run(f"{server}/ok") == 0
    assert run(f"{server}/down") != 0
    assert run("http://127.0.0.1:9/ok") != 0  # the discard port: nothing listens there


def _ignored(path: str, patterns: list[str]) -> bool:
    return any(
        fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, f"{p}/*") or path.startswith(f"{p}/")
        for p in patterns
    )


def test_the_build_context_leaves_out_environments_models_and_state() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for heavy_or_secret in (".venv", ".venv-vllm", ".models", ".arbiter", ".git", ".env"):
        assert _ignored(heavy_or_secret, patterns), heavy_or_secret
    copied = [
        part
        for line in DOCKERFILE.read_text().splitlines()
        if line.startswith("COPY ") and "--from" not in line
        for part in line.split()[1:-1]
    ]
    assert copied, "no COPY read from the Dockerfile"
    for source in copied:
        assert not _ignored(source, patterns), source
        assert (ROOT / source).exists(), source
