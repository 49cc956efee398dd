"""`arbiter bench perception`: what the rule tagger costs per request and how often it is right.

Cost: `tag()` timed alone with `perf_counter_ns`, `rounds` times, on a short prompt and on a
2,048-token one (an instruction before and after a pasted document of ~8,000 characters:
about 4 characters per token), interleaved so both see the same machine. Accuracy: on the
labelled sample `control_plane/perception/data/task_prompts.jsonl` (written by someone who
did not see the rules), split by line parity into a *dev* half (the only one looked at while
the rules were written or changed) and a *held-out* half; overall and per-type accuracy and
the confusion of the held-out half are reported. Lengths: the output-length predictor's MAE
and the conformal bound's online coverage on simulated scenarios (`length_prediction`).
Numbers are printed and written as JSON.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from control_plane.perception.tagger import tag
from control_plane.perception.tasks import TASK_TYPES

SAMPLE = Path(__file__).resolve().parents[1] / "perception" / "data" / "task_prompts.jsonl"
SHORT = "Can you translate 'where is the train station' into German?"
_DOC = (
    "The committee met on Tuesday to review the quarterly figures. Revenue rose in three of "
    "the four regions, while costs in logistics climbed faster than planned. "
)


def long_prompt(chars: int = 8192) -> str:
    """~2,048 tokens: an instruction, a pasted document, the instruction restated."""
    body = (_DOC * (chars // len(_DOC) + 1))[:chars]
    return f"Summarize the following report for the board.\n\n{body}\n\nKeep it to five bullets."


def load_sample(path: Path = SAMPLE) -> list[tuple[str, str]]:
    """(type, prompt) per line of the labelled sample."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            rows.append((str(item["type"]), str(item["prompt"])))
    return rows


def time_tagger(rounds: int = 20_000) -> dict[str, dict[str, float]]:
    """p50 and p99 of `tag()` in µs on the short and the 2,048-token prompt, interleaved."""
    prompts = {"short": SHORT, "2k_tokens": long_prompt()}
    samples: dict[str, list[int]] = {k: [] for k in prompts}
    for _ in range(rounds):
        for name, prompt in prompts.items():
            start = time.perf_counter_ns()
            tag(prompt)
            samples[name].append(time.perf_counter_ns() - start)
    return {
        name: {
            "p50_us": statistics.median(ns) / 1000.0,
            "p99_us": statistics.quantiles(ns, n=100)[98] / 1000.0,
            "chars": float(len(prompts[name])),
        }
        for name, ns in samples.items()
    }


def accuracy(rows: list[tuple[str, str]]) -> dict[str, Any]:
    """Overall and per-type accuracy of `tag()` on `rows`, with the confusions."""
    per_type: dict[str, list[int]] = {t: [0, 0] for t in TASK_TYPES}
    confusions: Counter[tuple[str, str]] = Counter()
    for truth, prompt in rows:
        got = tag(prompt)
        per_type.setdefault(truth, [0, 0])[1] += 1
        if got == truth:
            per_type[truth][0] += 1
        else:
            confusions[(truth, got)] += 1
    right = sum(r for r, _ in per_type.values())
    return {
        "n": len(rows),
        "accuracy": right / len(rows) if rows else None,
        "per_type": {t: r / n if n else None for t, (r, n) in per_type.items()},
        "confusions": [
            {"truth": t, "tagged": g, "count": c} for (t, g), c in confusions.most_common(15)
        ],
    }


LENGTH_SCENARIOS = ("exfairs-I", "hmas-stress", "hmas-drift")


def length_prediction(scenarios: Sequence[str] = LENGTH_SCENARIOS) -> dict[str, Any]:
    """Per scenario, simulated under fcfs with Statera's admission (as shipped, same seeds as
    `docs/results.md`): the length predictor's MAE and under-prediction rate over the answers
    served in full, and the conformal bound's online coverage against its target."""
    from control_plane.sim.runner import PluginChoice, run_policy
    from control_plane.sim.scenario import load_scenario
    from control_plane.sim.setup import PolicySpec

    out: dict[str, Any] = {}
    for name in scenarios:
        run = run_policy(
            load_scenario(name),
            PolicySpec("fcfs+statera", "fcfs"),
            plugins=PluginChoice(admission="statera", admission_params={}),
        )
        m = run.results.get("length_prediction") or {}
        cov = (run.results.get("admission") or {}).get("length_coverage") or {}
        out[name] = {
            "answers": m.get("n"),
            "mae": m.get("mae"),
            "under_rate": m.get("under_rate"),
            "mean_out": m.get("mean_out"),
            "coverage": cov.get("rate"),
            "scored": cov.get("scored"),
            "target": cov.get("target"),
        }
    return out


def run(
    rounds: int = 20_000, sample: Path = SAMPLE, scenarios: Sequence[str] = LENGTH_SCENARIOS
) -> dict[str, Any]:
    rows = load_sample(sample)
    return {
        "timing": time_tagger(rounds),
        "dev": accuracy(rows[0::2]),
        "held_out": accuracy(rows[1::2]),
        "sample": str(sample),
        "lengths": length_prediction(scenarios),
    }


def write(result: dict[str, Any], out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
