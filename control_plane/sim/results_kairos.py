"""The Kairos section of `docs/results.md`: workflow latency under parrot, ayo, kairos and the
two ablations, on the four Kairos scenarios as shipped and at the loads of the project's
sweep grid at and above them (papers/002 Figure 18 varies the request rate the same way).

Runs are keyed `<scenario>` (as shipped) and `<scenario>@<rho>`; each policy label fixes its
placement (the paper's baselines dispatch round-robin; Kairos uses its time-slot packing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control_plane.sim.results_fair import FAIR_SCENARIO, fair_section
from control_plane.sim.results_format import Results, fmt, table
from control_plane.sim.runner import PluginChoice
from control_plane.sim.setup import PolicySpec

KAIROS_PREFIX = "kairos-"
KAIROS_SCENARIOS = ("kairos-qa", "kairos-rg", "kairos-cg", "kairos-colocated")
KAIROS_RHOS = (1.0, 1.2)
"""The sweep grid's points above the shipped ρ ≈ 0.9 (below it even less can wait)."""
KAIROS_POLICIES = (
    PolicySpec("parrot", "parrot"),
    PolicySpec("ayo", "ayo"),
    PolicySpec("kairos", "kairos"),
    PolicySpec("kairos-rr", "kairos"),
    PolicySpec("fcfs-slots", "fcfs"),
)
ROUND_ROBIN = PluginChoice(placement="round_robin")
SLOTS = PluginChoice(placement="kairos_slots")
KAIROS_PLUGINS = {
    "parrot": ROUND_ROBIN,
    "ayo": ROUND_ROBIN,
    "kairos": SLOTS,
    "kairos-rr": ROUND_ROBIN,
    "fcfs-slots": SLOTS,
    "hmfs-kairos": SLOTS,
}
CLAIM = 0.178
"""Kairos's smallest reduction of mean latency against Parrot in the paper (§1, §7.2)."""

INTRO = """## Kairos: workflow-aware priority and memory-aware dispatch

Program-level token latency (a workflow's end-to-end time / the tokens it generated, seconds
per token): mean and P90 of each application over its completed workflows, averaged over the
run's applications weighted by their completed workflows; `done` = completed / issued
workflows (a workflow is completed when every call it issued ended ok before the run's end).
`parrot` = FCFS + round-robin, `ayo` = fewest remaining stages + round-robin,
`kairos` = learned priority + time-slot packing (`kairos_slots`), `kairos-rr` = learned
priority + round-robin, `fcfs-slots` = FCFS + time-slot packing (docs/algorithms.md §19).
`queue mean s` is the mean wait in the scheduler's queue over all calls — the only place an
order can act. The paper's claim: kairos lowers mean and P90 against parrot by at least
17.8 % and beats ayo (a verdict holds when both hold)."""


def _pooled(r: Mapping[str, Any], stat: str) -> float | None:
    """Workflow-weighted `stat` of the token latency over the run's applications."""
    apps = [m for m in (r.get("workflows") or {}).values() if m["completed"]]
    if not apps or any(m["token_latency_s"][stat] is None for m in apps):
        return None
    total = sum(int(m["completed"]) for m in apps)
    return sum(float(m["token_latency_s"][stat]) * int(m["completed"]) for m in apps) / total


def _done(r: Mapping[str, Any]) -> str:
    apps = (r.get("workflows") or {}).values()
    issued = sum(int(m["workflows"]) for m in apps)
    return f"{sum(int(m['completed']) for m in apps)}/{issued}"


def _preemptions(r: Mapping[str, Any]) -> int:
    return sum(int(w.get("preemptions") or 0) for w in r["per_worker"].values())


def _change(new: float | None, old: float | None) -> float | None:
    return None if new is None or not old else (new - old) / old


def pct(change: float | None) -> str:
    return "–" if change is None else f"{100 * change:+.1f}"


def kairos_rows(label: str, res: Results) -> list[list[str]]:
    base = res.get("parrot", {})
    rows = []
    for policy, r in res.items():
        mean, p90 = _pooled(r, "mean"), _pooled(r, "p90")
        vs = _change(mean, _pooled(base, "mean")) if base else None
        vs90 = _change(p90, _pooled(base, "p90")) if base else None
        rows.append(
            [
                label,
                policy,
                fmt(mean, 4),
                fmt(p90, 4),
                pct(vs),
                pct(vs90),
                fmt(r.get("queue_mean_s"), 3),
                _done(r),
                str(_preemptions(r)),
            ]
        )
    return rows


def verdict(label: str, res: Results) -> str:
    k, p, a = res.get("kairos"), res.get("parrot"), res.get("ayo")
    if not (k and p and a):
        return f"- {label}: incomplete"
    parts = []
    for stat in ("mean", "p90"):
        vs_p = _change(_pooled(k, stat), _pooled(p, stat))
        vs_a = _change(_pooled(k, stat), _pooled(a, stat))
        held = vs_p is not None and vs_p <= -CLAIM and vs_a is not None and vs_a < 0
        parts.append(
            f"{stat} {pct(vs_p)} % vs parrot, {pct(vs_a)} % vs ayo "
            f"({'holds' if held else 'does not hold'})"
        )
    return f"- {label}: " + "; ".join(parts)


def kairos_section(results: Mapping[str, Results]) -> str:
    header = [
        "run",
        "policy",
        "mean s/token",
        "P90 s/token",
        "mean vs parrot %",
        "P90 vs parrot %",
        "queue mean s",
        "done",
        "preemptions",
    ]
    fair = results.get(FAIR_SCENARIO)
    results = {label: res for label, res in results.items() if label != FAIR_SCENARIO}
    rows = [row for label, res in results.items() for row in kairos_rows(label, res)]
    verdicts = [verdict(label, res) for label, res in results.items()]
    parts = [INTRO, table(header, rows), "Verdicts:\n" + "\n".join(verdicts)]
    return "\n\n".join(parts + ([fair_section(fair)] if fair else []))


def replace_section(doc: str, section: str) -> str:
    """`doc` with its Kairos section replaced by `section` (inserted before "## Length
    prediction" when it has none): `--only kairos` regenerates just this part."""
    start = doc.find(INTRO.splitlines()[0])
    if start < 0:
        at = doc.index("## Length prediction")
        return doc[:at] + section + "\n\n" + doc[at:]
    end = doc.find("\n## ", start + 1)
    return doc[:start] + section + ("\n" + doc[end:] if end >= 0 else "\n")
