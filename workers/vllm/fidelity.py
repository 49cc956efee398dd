"""Sim-to-real fidelity: fit `tiny-cpu` to the real vLLM CPU server, then compare the two.

`run_fidelity` (the `arbiter worker fidelity` command):
1. starts the real vLLM server with the tiny model (`TINY_CPU_ARGS`) under `VllmSupervisor`
   (or uses the one at `url`);
2. measures prefill (lone requests, several prompt lengths) and decode (several batch sizes and
   context lengths) and fits the profile's step-time coefficients (`measure`, `profile_fit`);
3. writes the fitted profile (into `OUT/tiny-cpu.fitted.yaml`, and into the bundled
   `tiny-cpu.yaml` unless told not to), then starts the simulated worker with it;
4. runs the same closed-loop load (`levels` concurrent streams, each sending
   `requests_per_stream` requests with fixed prompt and output lengths, `ignore_eos`) against
   both, alternating in `rounds` so that drift in the machine's load hits both alike, and prints
   mean TTFT and TPOT as the client sees them, side by side with the relative error (target
   25 %), plus the servers' own mean TTFT and inter-token latency from their `/metrics`;
5. writes everything to `OUT/fidelity.json`.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from workers.engine.profile import load_profile
from workers.vllm import launch
from workers.vllm.fidelity_report import machine, say, table, write_profiles
from workers.vllm.loadgen import LoadSpec, RequestTiming, load, mean_tpot, mean_ttft
from workers.vllm.measure import (
    ITL,
    TTFT,
    histogram_totals,
    kv_capacity_tokens,
    measure_decode,
    measure_prefill,
)
from workers.vllm.profile_fit import Fit, fit_profile
from workers.vllm.servers import running_sim, supervised_vllm


@dataclass(frozen=True)
class FidelityConfig:
    """What to measure and compare; the defaults are the documented fidelity run."""

    out_dir: Path
    python: str
    write_profile: bool = True
    requests_per_stream: int = 16
    rounds: int = 4
    """The comparison alternates real and sim this many times per level (drift hits both)."""
    levels: tuple[int, ...] = (1, 8, 32)
    prompt_tokens: int = 256
    output_tokens: int = 64
    prefill_lengths: tuple[int, ...] = (16, 64, 128, 256, 512, 1024, 1536, 1920)
    # (prompt tokens, batch): short prompts at every batch size, and long contexts at several
    # batch sizes (their chunked prefills overlap other streams' decodes; the step features
    # account for that), so that the per-context-token cost has signal
    decode_runs: tuple[tuple[int, int], ...] = (
        *((16, b) for b in (1, 2, 4, 8, 16, 32, 64)),
        (256, 32),
        (768, 8),
        (1536, 1),
        (1536, 4),
    )
    decode_output_tokens: int = 128
    target: float = 0.25
    command: str = "arbiter worker fidelity"
    model_dir: Path = field(default_factory=lambda: launch.DEFAULT_TINY_MODEL_DIR)
    url: str | None = None
    """A vLLM server already serving the tiny model; None starts one from `model_dir`."""


def run_fidelity(cfg: FidelityConfig) -> int:
    """Run the whole fidelity procedure (module docstring); 0 when every error, client-side and
    server-side, is within the target."""
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    with _real_server(cfg) as root:
        model = _served_model(root)
        say(f"real vLLM at {root}: warming up, then measuring")
        _warm_up(root, model)
        fit, measured = _calibrate(root, model, cfg)
        profile = write_profiles(
            cfg.out_dir,
            fit,
            kv_tokens=kv_capacity_tokens(root),
            version=_version(root),
            command=cfg.command,
            method=_method(cfg),
            bundled=cfg.write_profile,
        )
        with running_sim(profile, cfg.out_dir / "sim.log") as sim_root:
            _warm_up(sim_root, _served_model(sim_root))
            rows = [_compare(root, sim_root, model, cfg, level) for level in cfg.levels]
    print(table(rows, cfg.target))
    verdict = _verdict(rows, cfg.target)
    say(
        f"within ±{cfg.target:.0%}: client-side {verdict['client']}, "
        f"server-side {verdict['server']}"
    )
    result = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": cfg.command,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        "machine": machine(),
        "fit": fit.coefficients,
        "measurements": measured,
        "comparison": rows,
        "target": cfg.target,
        "within_target": verdict,
    }
    out = cfg.out_dir / "fidelity.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    say(f"results: {out}; fitted profile: {profile}")
    return 0 if all(verdict.values()) else 1


def _verdict(rows: list[dict[str, Any]], target: float) -> dict[str, bool]:
    views = {"client": ("ttft", "tpot"), "server": ("server_ttft", "server_itl")}
    return {
        view: all(abs(r[f"{k}_error"]) <= target for r in rows for k in keys)
        for view, keys in views.items()
    }


def _calibrate(root: str, model: str, cfg: FidelityConfig) -> tuple[Fit, dict[str, Any]]:
    prefill = measure_prefill(root, model, list(cfg.prefill_lengths))
    profile = load_profile("tiny-cpu")  # its engine knobs schedule the runs' step features
    decode = measure_decode(root, model, list(cfg.decode_runs), cfg.decode_output_tokens, profile)
    fit = fit_profile(prefill, decode)
    measured = {
        "prefill": [
            {**asdict(p), "model_s": fit.predict_prefill(p.prompt_tokens)} for p in prefill
        ],
        "decode": [{**asdict(d), "model_s": fit.predict_decode(d)} for d in decode],
        "max_abs_residual": max(abs(r) for r in fit.residuals),
    }
    coefficients = ", ".join(f"{k}={v * 1e3:.4g} ms" for k, v in fit.coefficients.items())
    say(f"fit: {coefficients}; worst residual {measured['max_abs_residual']:.1%}")
    return fit, measured


@dataclass
class _Side:
    """One server under the comparison load: what the client saw and what it reported."""

    url: str
    model: str
    timings: list[RequestTiming] = field(default_factory=list)
    wall_s: float = 0.0
    totals: dict[str, list[float]] = field(
        default_factory=lambda: {TTFT: [0.0, 0.0], ITL: [0.0, 0.0]}
    )
    round_itls: list[float] = field(default_factory=list)

    def run(self, spec: LoadSpec) -> None:
        before = histogram_totals(self.url)
        started = time.perf_counter()
        self.timings += load(self.url, self.model, spec)
        self.wall_s += time.perf_counter() - started
        after = histogram_totals(self.url)
        for metric, acc in self.totals.items():
            acc[0] += after.totals[metric][0] - before.totals[metric][0]
            acc[1] += after.totals[metric][1] - before.totals[metric][1]
        self.round_itls.append(after.mean_since(before, ITL))

    def summary(self, name: str) -> dict[str, float]:
        tokens = sum(t.completion_tokens for t in self.timings)
        (ttft_sum, ttft_n), (itl_sum, itl_n) = self.totals[TTFT], self.totals[ITL]
        return {
            f"{name}_ttft_ms": mean_ttft(self.timings) * 1e3,
            f"{name}_tpot_ms": mean_tpot(self.timings) * 1e3,
            f"{name}_server_ttft_ms": ttft_sum / ttft_n * 1e3,
            f"{name}_server_itl_ms": itl_sum / itl_n * 1e3,
            f"{name}_tokens_per_s": tokens / self.wall_s,
            f"{name}_server_itl_spread": max(self.round_itls) / min(self.round_itls) - 1,
        }


def _compare(
    root: str, sim_root: str, model: str, cfg: FidelityConfig, level: int
) -> dict[str, Any]:
    per_round = max(1, cfg.requests_per_stream // cfg.rounds)
    sides = {"real": _Side(root, model), "sim": _Side(sim_root, _served_model(sim_root))}
    for r in range(cfg.rounds):
        spec = LoadSpec(level, per_round, cfg.prompt_tokens, cfg.output_tokens, level * 100 + r)
        for side in sides.values():
            side.run(spec)
    row: dict[str, Any] = {"concurrency": level, "requests": len(sides["real"].timings)}
    for name, side in sides.items():
        row |= side.summary(name)
    for key in ("ttft", "tpot", "server_ttft", "server_itl"):
        row[f"{key}_error"] = row[f"sim_{key}_ms"] / row[f"real_{key}_ms"] - 1
    say(f"{level} streams: TTFT error {row['ttft_error']:+.1%}, TPOT {row['tpot_error']:+.1%}")
    return row


def _method(cfg: FidelityConfig) -> str:
    lengths = ", ".join(map(str, cfg.prefill_lengths))
    runs = ", ".join(f"{b}x{p}" for p, b in cfg.decode_runs)
    return (
        f"non-negative relative least squares over the median server TTFT of lone requests "
        f"(prompt tokens {lengths}) and the median server inter-token latency of decode runs "
        f"(streams x prompt tokens: {runs}; {cfg.decode_output_tokens} output tokens each)."
    )


@contextmanager
def _real_server(cfg: FidelityConfig) -> Iterator[str]:
    if cfg.url:
        yield cfg.url.rstrip("/")
        return
    if not (cfg.model_dir / "config.json").exists():
        cmd = launch.tiny_model_command(cfg.python, cfg.model_dir)
        subprocess.run(cmd, check=True, capture_output=True)
    with supervised_vllm(cfg.python, cfg.model_dir, cfg.out_dir / "vllm.log") as root:
        yield root


def _warm_up(root: str, model: str) -> None:
    for level, prompt in ((1, 64), (8, 512), (32, 64)):
        load(root, model, LoadSpec(level, 1, prompt, 16, seed=99))


def _served_model(root: str) -> str:
    return str(httpx.get(f"{root}/v1/models", timeout=10).json()["data"][0]["id"])


def _version(root: str) -> str:
    try:
        return str(httpx.get(f"{root}/version", timeout=10).json()["version"])
    except (httpx.HTTPError, KeyError, ValueError):
        return "(unknown version)"
