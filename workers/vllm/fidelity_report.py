"""Presenting a fidelity run: the side-by-side table, provenance texts and the profile files."""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from workers.engine.profile import PROFILES_DIR
from workers.vllm import launch
from workers.vllm.profile_fit import Fit, write_profile

_COLUMNS = (
    ("ttft", "TTFT"),
    ("tpot", "TPOT"),
    ("server_ttft", "srv TTFT"),
    ("server_itl", "srv ITL"),
)


def say(message: str) -> None:
    """Progress on stderr, time-stamped."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(rows: list[dict[str, Any]], target: float) -> str:
    """Real vs simulated means (ms) and relative errors per concurrency level."""
    head = f"{'streams':>7}" + "".join(
        f" | {label + ' real':>13} {label + ' sim':>12} {'error':>7}" for _, label in _COLUMNS
    )
    head += f" | {'tok/s real':>10} {'tok/s sim':>9} | {'real ITL spread':>15}"
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = "".join(
            f" | {r[f'real_{k}_ms']:>11.2f}ms {r[f'sim_{k}_ms']:>10.2f}ms {r[f'{k}_error']:>+7.1%}"
            for k, _ in _COLUMNS
        )
        rates = f" | {r['real_tokens_per_s']:>10.0f} {r['sim_tokens_per_s']:>9.0f}"
        rates += f" | {r['real_server_itl_spread']:>15.1%}"
        lines.append(f"{r['concurrency']:>7}{cells}{rates}")
    lines.append(
        f"TTFT/TPOT: client-side means (target: within ±{target:.0%}); srv: the servers' own "
        "vllm:time_to_first_token_seconds / vllm:inter_token_latency_seconds means; tok/s: "
        "output tokens the client received per second of load; real ITL spread: max/min - 1 of "
        "the real server's ITL over the alternating rounds (the noise floor of this machine)."
    )
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    """CPU model, usable cores and Python version of this machine."""
    cpu = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    return {"cpu": cpu, "cores": len(os.sched_getaffinity(0)), "python": sys.version.split()[0]}


def write_profiles(
    out_dir: Path,
    fit: Fit,
    *,
    kv_tokens: int,
    version: str,
    command: str,
    method: str,
    bundled: bool,
) -> Path:
    """Write `OUT/tiny-cpu.fitted.yaml` (and the bundled `tiny-cpu.yaml` if `bundled`)."""
    source_file = PROFILES_DIR / "tiny-cpu.yaml"
    fitted = out_dir / "tiny-cpu.fitted.yaml"
    shutil.copyfile(source_file, fitted)
    flags = " ".join(launch.TINY_CPU_ARGS)
    host = machine()
    source = (
        f"Fitted on {dt.date.today().isoformat()} by `{command}` (workers/vllm/fidelity.py) "
        f"from the real vLLM {version} CPU server serving the tiny model ({flags}, "
        f"VLLM_CPU_KVCACHE_SPACE=1) on {host['cpu']} ({host['cores']} cores): {method} "
        "max_num_seqs / max_num_batched_tokens: vLLM's API-server defaults on CPU "
        "(vllm/engine/arg_utils.py: 128 seqs, 2048 tokens per step); kv_tokens: "
        "vllm:cache_config_info (num_gpu_blocks x block_size); jitter_cv: not fitted."
    )
    description = (
        "The tiny random-weight Llama (2 layers, hidden 256, head_dim 64) that `arbiter worker "
        f"tiny-model` writes, served by vllm-cpu {version} with `{flags}` on a small CPU box; "
        "vLLM's request handling (not HTTP) is folded into prefill_overhead."
    )
    for path in (fitted, source_file) if bundled else (fitted,):
        write_profile(path, fit, kv_tokens=kv_tokens, source=source, description=description)
    return fitted
