"""`arbiter worker vllm | tiny-model | fidelity`: real vLLM workers and their tiny test model."""

from __future__ import annotations

import importlib.util
import logging
import math
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from workers.vllm import launch
from workers.vllm import tiny_vlm as tiny_vlm_module
from workers.vllm.supervisor import Backoff, VllmSupervisor

PythonOpt = Annotated[
    str | None,
    typer.Option(
        "--python",
        help="vLLM's interpreter (default: $ARBITER_VLLM_PYTHON, else .venv-vllm/bin/python).",
    ),
]


def _refuse(param: typer.CallbackParam, problem: str) -> NoReturn:
    """A bad number, refused while the flags are parsed (it used to fail only when vLLM was
    restarted, stopped or never healthy): one line naming the flag, exit status 2."""
    typer.echo(f"error: {param.opts[0]}: {problem}", err=True)
    raise typer.Exit(2)


def _positive(ctx: typer.Context, param: typer.CallbackParam, value: float) -> float:
    if not ctx.resilient_parsing and not (math.isfinite(value) and value > 0):
        _refuse(param, f"must be a finite number > 0, got {value}")
    return value


def _not_negative(ctx: typer.Context, param: typer.CallbackParam, value: float) -> float:
    if not ctx.resilient_parsing and not (math.isfinite(value) and value >= 0):
        _refuse(param, f"must be a finite number >= 0, got {value}")
    return value


def _count(ctx: typer.Context, param: typer.CallbackParam, value: int) -> int:
    if not ctx.resilient_parsing and value < 0:
        _refuse(param, f"must be at least 0, got {value}")
    return value


def _port(ctx: typer.Context, param: typer.CallbackParam, value: int) -> int:
    if not ctx.resilient_parsing and not 1 <= value <= 65535:
        _refuse(param, f"must be a TCP port (1 to 65535), got {value}")
    return value


def register(worker_app: typer.Typer) -> None:
    """Add the `vllm`, `tiny-model`, `tiny-vlm` and `fidelity` commands to `arbiter worker`."""
    worker_app.command("vllm", no_args_is_help=True)(vllm_worker)
    worker_app.command("tiny-model")(tiny_model)
    worker_app.command("tiny-vlm")(tiny_vlm)
    worker_app.command("fidelity")(fidelity)


def vllm_worker(
    model: Annotated[str, typer.Option(help="Model directory or Hugging Face name.")],
    port: Annotated[int, typer.Option(callback=_port, help="Port of vLLM's OpenAI server.")] = 8000,
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    python: PythonOpt = None,
    served_model_name: Annotated[str | None, typer.Option(help="Name clients use.")] = None,
    tiny: Annotated[
        bool, typer.Option(help="Add the tiny-model CPU flags (dummy weights, eager, bf16).")
    ] = False,
    startup_timeout: Annotated[
        float, typer.Option(callback=_positive, help="Seconds to become healthy.")
    ] = 600.0,
    stop_timeout: Annotated[
        float, typer.Option(callback=_not_negative, help="Seconds between SIGTERM and SIGKILL.")
    ] = 30,
    max_restarts: Annotated[
        int, typer.Option(callback=_count, help="Consecutive failures before giving up.")
    ] = 10,
    backoff: Annotated[
        float,
        typer.Option(callback=_not_negative, help="First restart delay (doubles, max 60 s)."),
    ] = 1.0,
    extra: Annotated[
        list[str] | None, typer.Argument(help="Extra vLLM arguments after `--`.")
    ] = None,
) -> None:
    """Run vLLM's OpenAI server in its own environment; restart it if it dies; stop on SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    extra_args = [*(launch.TINY_CPU_ARGS if tiny else ()), *(extra or [])]
    python = python or launch.default_vllm_python()
    if not Path(python).exists():
        raise typer.BadParameter(f"{python} not found (make vllm-env)", param_hint="--python")
    command = launch.vllm_command(
        python,
        model,
        host=host,
        port=port,
        served_model_name=served_model_name,
        extra_args=extra_args,
    )
    root = launch.root_url(host, port)
    supervisor = VllmSupervisor(
        command,
        f"{root}/health",
        env=launch.vllm_env(),
        backoff=Backoff(initial_s=backoff, max_restarts=max_restarts),
        startup_timeout_s=startup_timeout,
        stop_timeout_s=stop_timeout,
        die_with_parent=True,
        on_ready=lambda s: print(f"vLLM ready at {root}/v1 (started in {s:.1f} s)", flush=True),
    )
    supervisor.install_signal_handlers()
    raise typer.Exit(supervisor.run())


def tiny_model(
    out: Annotated[Path, typer.Option(help="Directory to write.")] = launch.DEFAULT_TINY_MODEL_DIR,
    python: PythonOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the corpus and weights.")] = 0,
    weights: Annotated[
        bool, typer.Option(help="Also write random safetensors (not needed with dummy loading).")
    ] = True,
) -> None:
    """Write a tiny random-weight Llama model (BPE tokenizer trained on the spot, chat template)."""
    python = python or _tokenizers_python()
    cmd = launch.tiny_model_command(python, out, seed=seed, weights=weights)
    code = subprocess.run(cmd, check=False).returncode
    if code:
        raise typer.Exit(code)


def tiny_vlm(
    out: Annotated[Path, typer.Option(help="Directory to write.")] = tiny_vlm_module.DEFAULT_DIR,
    python: PythonOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the tokenizer's corpus.")] = 0,
) -> None:
    """Write a tiny vision-language model (PaddleOCR-VL: Qwen2-VL's image rule), no weights."""
    cmd = tiny_vlm_module.command(python or _tokenizers_python(), out.resolve(), seed=seed)
    code = subprocess.run(cmd, check=False, cwd=launch.REPO_ROOT).returncode
    if code:
        raise typer.Exit(code)


def fidelity(
    out: Annotated[Path, typer.Option(help="Directory for the results.")] = Path("out/fidelity"),
    python: PythonOpt = None,
    write_profile: Annotated[
        bool, typer.Option(help="Write the fitted coefficients into tiny-cpu.yaml.")
    ] = True,
    requests_per_stream: Annotated[int, typer.Option(help="Requests per stream per level.")] = 16,
    url: Annotated[
        str | None, typer.Option(help="Measure this running vLLM server (tiny model) instead.")
    ] = None,
) -> None:
    """Measure the real vLLM CPU server, fit `tiny-cpu`, compare it with the simulated worker."""
    from workers.vllm.fidelity import FidelityConfig, run_fidelity

    cfg = FidelityConfig(
        out_dir=out,
        python=python or launch.default_vllm_python(),
        write_profile=write_profile,
        requests_per_stream=requests_per_stream,
        url=url,
        command=_invocation("fidelity"),
    )
    raise typer.Exit(run_fidelity(cfg))


def _tokenizers_python() -> str:
    """This interpreter if it has `tokenizers`, else vLLM's (which always has it)."""
    if importlib.util.find_spec("tokenizers") is None:
        return launch.default_vllm_python()
    return sys.executable


def _invocation(command: str) -> str:
    """How this `arbiter worker COMMAND` was called, for provenance notes."""
    args = sys.argv[sys.argv.index(command) + 1 :] if command in sys.argv else []
    return shlex.join(["arbiter", "worker", command, *args])
