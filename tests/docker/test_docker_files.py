"""The docker/ files parse, and every Arbiter command they run exists in our CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from control_plane.settings import load_settings
from tests.support.cli_commands import assert_arbiter_command

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker" / "compose.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
ROLES = {"gateway", "scheduler", "recorder", "worker", "console"}


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def _arbiter_commands() -> list[list[str]]:
    """The argv of every service that runs the Arbiter image's `arbiter` entrypoint."""
    out = []
    for name, svc in _compose()["services"].items():
        if svc.get("image") == "arbiter:latest" and "entrypoint" not in svc:
            assert svc.get("command"), f"{name} runs arbiter without a command"
            out.append([str(part) for part in svc["command"]])
    return out


def test_compose_has_every_role() -> None:
    services = _compose()["services"]
    assert {
        "redis",
        "postgres",
        "scheduler",
        "scheduler-standby",
        "recorder",
        "gateway-1",
        "gateway-2",
        "console",
        "worker-sim-1",
        "worker-sim-2",
    } <= set(services)
    assert "--appendonly" in services["redis"]["command"]
    assert (
        services["gateway-1"]["environment"]["ARBITER_GATEWAY_ID"]
        != services["gateway-2"]["environment"]["ARBITER_GATEWAY_ID"]
    )


def test_every_command_exists_in_the_cli() -> None:
    commands = _arbiter_commands()
    assert {c[0] for c in commands} >= {"gateway", "scheduler", "recorder", "worker"}
    for argv in commands:
        assert_arbiter_command(argv)


def test_console_entrypoint_points_at_the_app() -> None:
    console = _compose()["services"]["console"]
    app = console["entrypoint"][console["entrypoint"].index("run") + 1]
    assert app == "/opt/arbiter/console/streamlit_app.py"
    assert "COPY console /opt/arbiter/console" in DOCKERFILE.read_text()


def test_dockerfile_entrypoint_is_the_cli() -> None:
    text = DOCKERFILE.read_text()
    assert 'ENTRYPOINT ["arbiter"]' in text
    assert "FROM python:3.11" in text


def test_the_gpu_override_supervises_and_registers_its_vllm_workers() -> None:
    base = _compose()["services"]
    gpu = yaml.safe_load((ROOT / "docker" / "compose.gpu.yaml").read_text())["services"]
    vllm = {name: svc for name, svc in gpu.items() if name not in base}
    assert sorted(vllm) == ["vllm-1", "vllm-2"]
    urls = set()
    for name, svc in vllm.items():
        assert svc["restart"] == "unless-stopped"
        assert "/health" in " ".join(svc["healthcheck"]["test"])
        port = svc["command"][svc["command"].index("--port") + 1]
        urls.add(f"http://{name}:{port}")
        devices = svc["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"]
    for name in ("scheduler", "scheduler-standby"):  # whichever leads registers them
        value = gpu[name]["environment"]["ARBITER_WORKERS"]
        default = value.split(":-", 1)[1].rstrip("}")
        assert {entry.split("|")[0] for entry in default.split(",")} == urls
    assert set(gpu) - set(vllm) <= set(base)


def test_the_arbiter_environment_passes_the_settings_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every Arbiter service's environment (defaults of `${VAR:-default}` filled in) is what a
    process accepts at start."""
    for svc in _compose()["services"].values():
        if svc.get("image") != "arbiter:latest":
            continue
        with monkeypatch.context() as env:
            for key, value in (svc.get("environment") or {}).items():
                if key.startswith("ARBITER_"):
                    env.setenv(key, _default(str(value)))
            load_settings()


def _default(value: str) -> str:
    """`${VAR:-default}` → default; `${VAR:?message}` → a placeholder; else the value."""
    if value.startswith("${") and ":-" in value:
        return value[value.index(":-") + 2 : -1]
    if value.startswith("${"):
        return "set-by-operator"
    return value


def test_each_gateway_container_runs_arbiter_gateways_processes() -> None:
    """`ARBITER_GATEWAYS` (default 1, today's single process) is honoured by the gateway
    containers' own command: `arbiter gateway` reads it (`--processes` unset)."""
    from control_plane.up.gateways import GATEWAYS_ENV, processes_from

    services = _compose()["services"]
    for name in ("gateway-1", "gateway-2"):
        svc = services[name]
        value = str(svc["environment"][GATEWAYS_ENV])
        assert value == "${ARBITER_GATEWAYS:-1}"
        assert processes_from(None, {GATEWAYS_ENV: _default(value)}) == 1
        assert processes_from(None, {GATEWAYS_ENV: "4"}) == 4
        assert svc["command"][0] == "gateway" and "--processes" not in svc["command"]


def test_the_gpu_override_does_not_run_the_simulated_workers() -> None:
    """Regression: they stayed up beside vLLM, registered (Redis keeps them on its volume),
    serving tenants made-up text under the same model name."""
    base = _compose()["services"]
    gpu = yaml.safe_load((ROOT / "docker" / "compose.gpu.yaml").read_text())["services"]
    simulated = [n for n, svc in base.items() if svc.get("command", [])[:2] == ["worker", "sim"]]
    assert simulated
    for name in simulated:
        assert gpu[name]["profiles"] == ["sim"], name


def test_gateways_get_the_metrics_token_and_drain_before_they_are_killed() -> None:
    services = _compose()["services"]
    gateways = [n for n, svc in services.items() if (svc.get("command") or [""])[0] == "gateway"]
    assert gateways
    for name in gateways:
        env, svc = services[name]["environment"], services[name]
        assert env["ARBITER_METRICS_TOKEN"] == "${ARBITER_METRICS_TOKEN:-}", name
        drain = int(env["ARBITER_SHUTDOWN_GRACE_S"])
        assert int(svc["stop_grace_period"].rstrip("s")) >= drain + 5, name


def test_unauthenticated_ports_are_published_on_this_host_only() -> None:
    services = _compose()["services"]
    for name in ("scheduler", "console", "prometheus", "grafana"):
        for port in services[name].get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)


def test_every_role_starts_only_after_the_database_is_migrated() -> None:
    """`migrate` is a one-shot `arbiter migrate` after PostgreSQL answers, and every Arbiter
    role that reads SQL waits for it to succeed: a new gateway never serves an old schema."""
    services = _compose()["services"]
    step = services["migrate"]
    assert step["command"] == ["migrate"] and step["restart"] == "no"
    assert step["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert "healthcheck" not in step
    for name, svc in services.items():
        argv = svc.get("command") or []
        if svc.get("image") != "arbiter:latest" or name == "migrate":
            continue
        if argv and argv[0] in {"gateway", "recorder", "scheduler"}:
            needs = svc["depends_on"]
            assert needs["migrate"] == {"condition": "service_completed_successfully"}, name
            assert (
                svc["environment"]["ARBITER_DATABASE_URL"]
                == step["environment"]["ARBITER_DATABASE_URL"]
            ), name
