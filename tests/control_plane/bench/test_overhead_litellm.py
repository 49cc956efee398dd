"""`arbiter bench overhead --litellm-venv`: the LiteLLM config it generates, its flag checks
(one line, exit 2, before anything starts), the ratios it prints, and — when a LiteLLM virtual
environment is at hand (`ARBITER_TEST_LITELLM_VENV`, default /tmp/litellm-venv) — a real proxy
relaying a streamed request to a real simulated worker."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from control_plane.bench.overhead_litellm import (
    LiteLLMProxy,
    litellm_exe,
    proxy_config,
    ratios,
)
from control_plane.core.cli_errors import OptionError
from control_plane.up.children import Child
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
VENV = Path(os.environ.get("ARBITER_TEST_LITELLM_VENV", "/tmp/litellm-venv"))


def test_the_config_lists_each_worker_round_robin_without_a_database() -> None:
    config = proxy_config(["http://127.0.0.1:1", "http://127.0.0.1:2/"], "tiny-llama", "sk-x")
    again = yaml.safe_load(yaml.safe_dump(config))
    assert again == config
    assert [d["model_name"] for d in config["model_list"]] == ["tiny-llama", "tiny-llama"]
    assert [d["litellm_params"]["api_base"] for d in config["model_list"]] == [
        "http://127.0.0.1:1/v1",
        "http://127.0.0.1:2/v1",
    ]
    assert {d["litellm_params"]["model"] for d in config["model_list"]} == {
        "hosted_vllm/tiny-llama"
    }
    assert config["router_settings"] == {"routing_strategy": "simple-shuffle"}
    general = config["general_settings"]
    assert general["master_key"] == "sk-x"
    assert general["disable_spend_logs"] is True and general["disable_error_logs"] is True
    assert "database_url" not in general
    assert config["litellm_settings"]["set_verbose"] is False


def test_a_venv_without_litellm_is_named(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match=r"^--litellm-venv: .* is not a directory$"):
        litellm_exe(tmp_path / "absent")
    with pytest.raises(OptionError, match=r"^--litellm-venv: no executable .*bin/litellm"):
        litellm_exe(tmp_path)
    exe = tmp_path / "bin" / "litellm"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    with pytest.raises(OptionError, match="no executable"):
        litellm_exe(tmp_path)  # not executable
    exe.chmod(0o755)
    assert litellm_exe(tmp_path) == exe


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ["--litellm-venv", "/nonexistent/venv"],
            "error: --litellm-venv: /nonexistent/venv is not",
        ),
        (["--gateways", "0"], "error: --gateways: must be at least 1, got 0"),
        (["--litellm-workers", "0"], "error: --litellm-workers: must be at least 1, got 0"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(flags: list[str], line: str, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = subprocess.run(
        [sys.executable, "-m", "control_plane", "bench", "overhead", *flags, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().startswith(line), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()  # nothing ran


def test_ratios_are_arbiter_over_litellm() -> None:
    rows = [
        {
            "concurrency": 1,
            "gateway": {"added_ttft_p50_ms": 2.0, "added_ttft_p99_ms": 6.0, "rps": 300.0},
            "litellm": {"added_ttft_p50_ms": 20.0, "added_ttft_p99_ms": 30.0, "rps": 30.0},
        },
        {"concurrency": 64, "gateway": {"added_ttft_p50_ms": 1.0, "rps": 1.0}},
    ]
    assert ratios(rows) == [
        {"concurrency": 1, "added_ttft_p50": 0.1, "added_ttft_p99": 0.2, "rps": 10.0}
    ]


# -- a real LiteLLM, when one is installed -----------------------------------------------------


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "control_plane", "worker", "sim", "--port", str(port)]
    child = Child(
        "worker",
        [*argv, "--profile", "tiny-cpu", "--speed", "1000"],
        tmp_path / "worker.log",
        health_url=f"http://127.0.0.1:{port}/health",
    )
    child.start()
    try:
        child.wait_healthy(60)
        yield f"http://127.0.0.1:{port}"
    finally:
        child.stop()


@pytest.mark.slow
def test_a_real_litellm_relays_a_stream_to_the_worker(worker: str, tmp_path: Path) -> None:
    if not (VENV / "bin" / "litellm").exists():
        pytest.skip(
            f"no LiteLLM at {VENV} (python3.11 -m venv {VENV} && {VENV}/bin/pip install "
            "'litellm[proxy]', or set ARBITER_TEST_LITELLM_VENV)"
        )
    proxy = LiteLLMProxy(VENV, [worker], "tiny-llama", processes=1, port=free_port())
    proxy.start(tmp_path)
    try:
        target = proxy.target()
        body = {
            "model": "tiny-llama",
            "prompt": "hi",
            "max_tokens": 16,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with httpx.stream("POST", target.url, json=body, headers=target.headers, timeout=60) as r:
            assert r.status_code == 200
            lines = [line for line in r.iter_lines() if line.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        assert '"completion_tokens":16' in lines[-2].replace(" ", "")
        described = proxy.describe()
        assert described["version"] != "unknown"
        assert described["general_settings"]["master_key"] == "(set)"
        assert proxy.master_key not in str(described)
    finally:
        proxy.stop()
