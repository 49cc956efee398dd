"""`arbiter sim replay`'s client against a real simulated vLLM worker process (OpenAI API)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from control_plane.sim import cli
from control_plane.sim.cluster import unit_factors
from control_plane.sim.live_bench import LiveTarget, load_keys, replay, request_headers
from control_plane.sim.live_report import live_document
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import build_workload
from tests.control_plane.sim.builders import scenario_dict, tiny
from tests.control_plane.sim.test_workflows import workflow_scenario
from tests.support.ports import free_port, wait_http

REPO = Path(__file__).resolve().parents[3]
SPEED = 20.0


@pytest.fixture
def worker_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workers.sim",
            "--port",
            str(port),
            "--profile",
            "llama3-8b-a100",
            "--speed",
            str(SPEED),
            "--max-num-seqs",
            "8",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.e2e
def test_replay_sends_the_scenario_and_records_what_clients_see(worker_url: str) -> None:
    scenario = tiny(duration_s=4)
    specs = build_workload(scenario)
    target = LiveTarget(worker_url, {"*": "sk-test"}, speed=SPEED, timeout_s=60)
    records = asyncio.run(replay(specs, unit_factors(scenario), target))
    assert len(records) == len(specs) > 10
    for spec, r in zip(specs, records, strict=True):
        assert r.status == "ok", r
        assert r.n_out == spec.n_out  # the simulated worker ends at min_tokens
        assert r.first_token is not None and r.finished is not None
        assert spec.arrival <= r.first_token <= r.finished
        assert r.dispatched is not None  # no gateway header: first token stands in
    doc = live_document(scenario, records, PolicySpec("live", "live"), SPEED)
    res = doc["results"]["live"]
    assert res["completed"] == len(specs) and res["tokens_per_s"] > 0


@pytest.mark.e2e
def test_replay_counts_why_requests_failed(worker_url: str) -> None:
    scenario = tiny(duration_s=1)
    specs = build_workload(scenario)
    target = LiveTarget(worker_url, {"*": "sk-test"}, speed=SPEED, models={"llama3-8b": "nope"})
    failures: dict[str, int] = {}
    records = asyncio.run(replay(specs, unit_factors(scenario), target, failures=failures))
    assert records and all(r.status == "error" for r in records)
    assert failures == {"HTTP 404 NotFoundError": len(records)}  # vLLM's error type


def test_headers_scale_slos_and_carry_the_hierarchy(tmp_path: Path) -> None:
    spec = build_workload(tiny())[0]
    headers = request_headers(spec, "sk-1", speed=4.0)
    assert headers["Authorization"] == "Bearer sk-1"
    assert headers["X-Arbiter-App"] == "default" and headers["X-Arbiter-Agent"] == "default"
    slo_headers = {k: v for k, v in headers.items() if k.startswith("X-Arbiter-SLO")}
    if spec.tenant == "a":
        assert slo_headers == {"X-Arbiter-SLO-E2E-Ms": "2500"}  # 10 s / 4
    else:
        assert slo_headers == {"X-Arbiter-SLO-TTFT-Ms": "250", "X-Arbiter-SLO-TPOT-Ms": "12"}
    keys = tmp_path / "up.json"
    keys.write_text('{"gateway_url": "http://gw:8000", "tenants": {"a": "sk-a"}}')
    assert load_keys(keys) == ("http://gw:8000", {"a": "sk-a"})
    with pytest.raises(ValueError, match="no API key"):
        LiveTarget("http://gw", {"a": "sk-a"}).key_for("b")


@pytest.mark.e2e
def test_bench_command_writes_the_simulator_s_results_shape(
    worker_url: str, tmp_path: Path
) -> None:
    app = typer.Typer()
    cli.register(app)
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump(scenario_dict(duration_s=3)), encoding="utf-8")
    out = tmp_path / "live"
    args = [
        "replay",
        str(scenario),
        "--gateway",
        worker_url,
        "--api-key",
        "sk-x",
        "--speed",
        str(SPEED),
        "--label",
        "fcfs",
        "--model",
        "llama3-8b=llama3-8b",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["scenario"]["source"] == "live" and list(data["results"]) == ["fcfs"]
    assert data["results"]["fcfs"]["completed"] == data["results"]["fcfs"]["requests"] > 5
    assert (out / "report.html").is_file()


SEQUENCE = [
    {"from": "router", "mode": "sequence", "to": [{"agent": "math"}, {"agent": "humanities"}]},
    {"from": "math", "to": [{"agent": "qa", "p": 0.5}]},
]


@pytest.mark.e2e
def test_workflows_replay_in_a_closed_loop(worker_url: str) -> None:
    scenario = workflow_scenario(SEQUENCE).with_overrides(None, 4.0)
    specs = build_workload(scenario)
    target = LiveTarget(worker_url, {"*": "sk-test"}, speed=SPEED, timeout_s=60)
    records = asyncio.run(replay(specs, unit_factors(scenario), target))
    assert sorted(r.id for r in records) == sorted(s.id for s in specs)
    assert {r.status for r in records} == {"ok"}
    by_id = {r.id: r for r in records}
    waited = 0
    for spec in specs:
        r = by_id[spec.id]
        if spec.after is None:
            assert r.arrival == spec.arrival
            continue
        before = by_id[spec.after]
        assert before.finished is not None and r.first_token is not None
        assert r.arrival == pytest.approx(before.finished + spec.think_s)
        assert r.first_token >= r.arrival  # sent only once its predecessor ended
        waited += 1
    assert waited > len(specs) // 2


def test_a_failed_call_releases_nothing() -> None:
    specs = build_workload(workflow_scenario(SEQUENCE).with_overrides(None, 2.0))
    roots = [s for s in specs if s.after is None]
    target = LiveTarget("http://127.0.0.1:9", {"*": "sk"}, speed=50.0, timeout_s=5)
    records = asyncio.run(replay(specs, {}, target))
    assert len(roots) < len(specs)
    assert sorted(r.id for r in records) == sorted(s.id for s in roots)
    assert {r.status for r in records} == {"error"}


def test_workflow_calls_carry_their_workflow_and_upstream() -> None:
    specs = build_workload(workflow_scenario(SEQUENCE).with_overrides(None, 2.0))
    root = next(s for s in specs if s.after is None)
    child = next(s for s in specs if s.after == root.id)
    assert request_headers(root, "k", 1.0)["X-Arbiter-Workflow"] == root.workflow
    assert "X-Arbiter-Upstream" not in request_headers(root, "k", 1.0)
    headers = request_headers(child, "k", 1.0)
    assert headers["X-Arbiter-Workflow"] == root.workflow
    assert headers["X-Arbiter-Upstream"] == "router" and headers["X-Arbiter-Agent"] == child.agent
