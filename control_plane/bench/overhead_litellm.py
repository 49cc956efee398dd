"""`arbiter bench overhead --litellm-venv PATH`: a LiteLLM proxy in the same rounds.

LiteLLM is not a dependency: it runs from its own virtual environment (`PATH/bin/litellm`),
as a separate process pointed at the same simulated workers, and the bench measures it in the
same interleaved rounds as "direct" and "gateway", so the ratio Arbiter / LiteLLM comes out of
one run.

Its settings are those of LiteLLM's "Best Practices for Production" page, less what needs
services the bench does not have:

- `general_settings`: a `master_key` (every request is authenticated, as Arbiter's are), no
  database (`database_url` unset: no key lookups, no spend writes), `disable_spend_logs` and
  `disable_error_logs`.
- `litellm_settings`: `set_verbose: false`, `json_logs: true`, `request_timeout: 600`.
- `router_settings`: `routing_strategy: simple-shuffle` (LiteLLM's default and recommended
  strategy; with equal weights, a random pick per request), over one deployment per worker.
- Environment: `LITELLM_LOG=ERROR` (FastAPI's info logs off), `LITELLM_MODE=PRODUCTION` (no
  `.env` loading), `LITELLM_LOCAL_MODEL_COST_MAP=True` (the bundled cost map, no fetch at
  start: the box may have no route to GitHub).
- `--num_workers` = the CPUs of the machine, changeable with `--litellm-workers`; with more than
  one, under Gunicorn (`--run_gunicorn`), as the docs advise on a VM or bare metal (one Uvicorn
  worker per pod is their advice for Kubernetes, which `--litellm-workers 1` gives). Uvicorn's
  own multi-worker mode was tried: on this loaded 2-CPU box it killed and restarted its
  workers before they finished importing LiteLLM, for minutes.
- Each worker is a `hosted_vllm/<model>` deployment (LiteLLM's provider for vLLM's
  OpenAI-compatible server), so `ignore_eos` reaches the worker as with the other targets.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from control_plane.bench.load import Target
from control_plane.core.cli_errors import OptionError
from control_plane.up.children import Child

ENVIRONMENT = {
    "LITELLM_LOG": "ERROR",
    "LITELLM_MODE": "PRODUCTION",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}
START_TIMEOUT_S = 180.0


def litellm_exe(venv: Path) -> Path:
    """`venv/bin/litellm`, checked; `OptionError` naming `--litellm-venv` when it is not there."""
    exe = venv / "bin" / "litellm"
    if not venv.is_dir():
        raise OptionError(f"--litellm-venv: {venv} is not a directory")
    if not (exe.is_file() and os.access(exe, os.X_OK)):
        raise OptionError(
            f"--litellm-venv: no executable {exe} (create it: python3.11 -m venv {venv} && "
            f"{venv}/bin/pip install 'litellm[proxy]')"
        )
    return exe


def check_workers(n: int) -> int:
    """`--litellm-workers`: a whole number ≥ 1."""
    if n < 1:
        raise OptionError(f"--litellm-workers: must be at least 1, got {n}")
    return n


def proxy_config(workers: list[str], model: str, master_key: str) -> dict[str, Any]:
    """LiteLLM's config.yaml (as a dict): one deployment of `model` per worker URL."""
    deployments = [
        {
            "model_name": model,
            "litellm_params": {
                "model": f"hosted_vllm/{model}",
                "api_base": f"{url.rstrip('/')}/v1",
                "api_key": "none",
            },
        }
        for url in workers
    ]
    return {
        "model_list": deployments,
        "router_settings": {"routing_strategy": "simple-shuffle"},
        "litellm_settings": {"set_verbose": False, "json_logs": True, "request_timeout": 600},
        "general_settings": {
            "master_key": master_key,
            "disable_spend_logs": True,
            "disable_error_logs": True,
        },
    }


class LiteLLMProxy:
    """One LiteLLM proxy process (with its workers), in its own process group."""

    def __init__(self, venv: Path, workers: list[str], model: str, *, processes: int, port: int):
        self.exe = litellm_exe(venv)
        self.venv, self.port, self.processes = venv, port, processes
        self.master_key = "sk-" + secrets.token_urlsafe(16)
        self.config = proxy_config(workers, model, self.master_key)
        self.child: Child | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def target(self, path: str = "/v1/completions") -> Target:
        return Target(self.url + path, {"Authorization": f"Bearer {self.master_key}"})

    def start(self, work_dir: Path) -> None:
        """Write the config into `work_dir`, start the proxy and wait until it answers."""
        config_path = work_dir / "litellm.yaml"
        config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        config_path.chmod(0o600)  # it holds the master key
        argv = [str(self.exe), "--config", str(config_path), "--host", "127.0.0.1"]
        argv += ["--port", str(self.port), "--num_workers", str(self.processes)]
        if self.processes > 1:
            argv.append("--run_gunicorn")
        self.child = Child(
            "litellm",
            argv,
            work_dir / "logs" / "litellm.log",
            dict(ENVIRONMENT),
            health_url=f"{self.url}/health/liveliness",
        )
        self.child.start()
        try:
            self.child.wait_healthy(START_TIMEOUT_S)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop(grace_s=10.0)

    def describe(self) -> dict[str, Any]:
        """What was measured: version, processes, settings (the master key left out)."""
        general = {k: v for k, v in self.config["general_settings"].items() if k != "master_key"}
        return {
            "version": litellm_version(self.venv),
            "num_workers": self.processes,
            "server": "gunicorn" if self.processes > 1 else "uvicorn",
            "environment": ENVIRONMENT,
            "router_settings": self.config["router_settings"],
            "litellm_settings": self.config["litellm_settings"],
            "general_settings": {**general, "master_key": "(set)"},
            "provider": self.config["model_list"][0]["litellm_params"]["model"],
        }


def litellm_version(venv: Path) -> str:
    """The installed LiteLLM's version ("unknown" when its interpreter cannot tell)."""
    python = venv / "bin" / "python"
    code = "import importlib.metadata as m; print(m.version('litellm'))"
    try:
        out = subprocess.run(
            [str(python if python.exists() else sys.executable), "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per concurrency: Arbiter's figure over LiteLLM's (added TTFT: lower is better; req/s:
    higher is better), from the medians over rounds."""
    out = []
    for row in rows:
        gw, ll = row.get("gateway"), row.get("litellm")
        if gw is None or ll is None:
            continue
        out.append(
            {
                "concurrency": row["concurrency"],
                "added_ttft_p50": _ratio(gw["added_ttft_p50_ms"], ll["added_ttft_p50_ms"]),
                "added_ttft_p99": _ratio(gw["added_ttft_p99_ms"], ll["added_ttft_p99_ms"]),
                "rps": _ratio(gw["rps"], ll["rps"]),
            }
        )
    return out


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b else float("nan")


def litellm_table(result: dict[str, Any]) -> Table:
    """LiteLLM's rows beside Arbiter's, and the ratio, per concurrency."""
    info = result["litellm"]
    table = Table(
        title=f"Arbiter vs LiteLLM {info['version']} ({info['num_workers']} {info['server']} "
        "workers), same rounds; ratio = Arbiter / LiteLLM"
    )
    for col in ("c", "target", "TTFT p50 / p99", "added p50", "added p99", "req/s", "errors"):
        table.add_column(col, justify="right")
    by_c = {r["concurrency"]: r for r in info["ratios"]}
    for row in result["rows"]:
        c = row["concurrency"]
        for name in ("gateway", "litellm"):
            s = row[name]
            table.add_row(
                str(c),
                "arbiter" if name == "gateway" else "litellm",
                f"{s['ttft_p50_ms']:.2f} / {s['ttft_p99_ms']:.2f} ms",
                f"{s['added_ttft_p50_ms']:+.2f} ms",
                f"{s['added_ttft_p99_ms']:+.2f} ms",
                f"{s['rps']:.0f}",
                str(s["errors"]),
            )
        r = by_c[c]
        table.add_row(
            str(c),
            "ratio",
            "",
            f"{r['added_ttft_p50']:.2f}×",
            f"{r['added_ttft_p99']:.2f}×",
            f"{r['rps']:.2f}×",
            "",
        )
    return table
