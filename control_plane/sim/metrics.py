"""One policy's results from its request records: the stable keys of `results.json`.

`policy_results` returns `{metric: value, "per_tenant": {tenant: {metric: value}},
"per_node": {"tenant/app[/agent]": …}, "per_worker": …, "per_phase": …, "timeseries": …,
"cdf": …}`. `GROUP_KEYS` are computed for every group (run, tenant, node, phase);
`RUN_KEYS` and `TENANT_KEYS` are added at their level. Latencies are seconds of scenario time;
rates are per second of the measured window (`[0, duration_s]`, or the phase's window).
`service` is what was charged (Unified Tokens, `w_p = 1`, `w_q = 2`); `demand` is what full
service of every request would have cost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from control_plane.core.unified import unified_cost
from control_plane.sim.fairness_metrics import esg, jain, safi, violation_rate
from control_plane.sim.percentiles import cdf_points, summary
from control_plane.sim.program_metrics import workflow_metrics
from control_plane.sim.records import RequestRecord
from control_plane.sim.timeseries import output_tokens_between, timeseries

_LATENCY = [f"{m}_{s}_s" for m in ("ttft", "tpot", "e2e") for s in ("mean", "p50", "p90", "p99")]
GROUP_KEYS: tuple[str, ...] = (
    "requests",
    "completed",
    "timeouts",
    "withdrawn",
    "aborted",
    "errors",
    "rejected",
    "slo_violation_rate",
    "ttft_compliance",
    "tpot_compliance",
    *_LATENCY,
    "ttft_cv",
    "queue_mean_s",
    "queue_p99_s",
    "tokens_per_s",
    "goodput_rps",
    "esg",
    "esg_per_s",
    "service",
    "demand",
)
RUN_KEYS = (
    "mean_safi",
    "jain_safi",
    "jain_service",
    "jain_violations",
    "max_service_gap",
    "service_gap_pair",
)
TENANT_KEYS = ("weight", "service_share", "safi")
WORKER_KEYS = ("requests", "tokens_per_s", "busy_fraction", "preemptions")


@dataclass
class RunInfo:
    """What the records do not say: the window, the tenants, and simulator-only measurements."""

    duration_s: float
    end_s: float
    tenants: Sequence[str]
    weights: Mapping[str, float]
    phases: Sequence[tuple[str, float, float]] = ()
    max_service_gap: float | None = None
    gap_pair: tuple[str, str] | None = None
    workers: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Worker id → simulator-side stats (`busy_s`, `preemptions`)."""
    window_s: float = 60.0


def _compliance(records: Sequence[RequestRecord], kind: str) -> float | None:
    with_target = [r for r in records if getattr(r.slo, f"{kind}_s") is not None]
    if not with_target:
        return None
    met = 0
    for r in with_target:
        value = getattr(r, f"{kind}_s")
        met += r.status == "ok" and value is not None and value <= getattr(r.slo, f"{kind}_s")
    return met / len(with_target)


def _cv(values: list[float]) -> float | None:
    """Coefficient of variation (std / mean), H-MAS's stability measure; None when undefined."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    if mean <= 0:
        return None
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return float(var**0.5 / mean)


def group_metrics(records: Sequence[RequestRecord], t0: float, t1: float) -> dict[str, Any]:
    """`GROUP_KEYS` over `records`, rates over the window `[t0, t1]`."""
    span = max(t1 - t0, 1e-9)
    status: dict[str, int] = defaultdict(int)
    for r in records:
        status[r.status] += 1
    good = sum(1 for r in records if r.status == "ok" and not r.violated())
    out: dict[str, Any] = {
        "requests": len(records),
        "completed": status["ok"],
        "timeouts": status["timeout"],
        "withdrawn": status["withdrawn"],
        "aborted": status["aborted"],
        "errors": status["error"],
        "rejected": status["rejected"],
        "slo_violation_rate": violation_rate(records),
        "ttft_compliance": _compliance(records, "ttft"),
        "tpot_compliance": _compliance(records, "tpot"),
    }
    for metric in ("ttft", "tpot", "e2e"):
        out.update(summary((getattr(r, f"{metric}_s") for r in records), metric))
    out["ttft_cv"] = _cv([r.ttft_s for r in records if r.ttft_s is not None])
    queue = summary((r.queue_s for r in records), "queue")
    out["queue_mean_s"], out["queue_p99_s"] = queue["queue_mean_s"], queue["queue_p99_s"]
    out["tokens_per_s"] = output_tokens_between(records, t0, t1) / span
    out["goodput_rps"] = good / span
    total_esg = esg(records)
    out["esg"], out["esg_per_s"] = total_esg, total_esg / span
    out["service"] = sum(r.service() for r in records)
    out["demand"] = sum(unified_cost(r.n_in, r.length, r.unit_factor) for r in records)
    return out


def _by(records: Sequence[RequestRecord], key: str) -> dict[str, list[RequestRecord]]:
    groups: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        groups[getattr(r, key) or ""].append(r)
    return groups


def _per_node(records: Sequence[RequestRecord], duration: float) -> dict[str, Any]:
    groups: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        groups[f"{r.tenant}/{r.app}"].append(r)
        groups[f"{r.tenant}/{r.app}/{r.agent}"].append(r)
    return {node: group_metrics(rs, 0.0, duration) for node, rs in sorted(groups.items())}


def _per_worker(records: Sequence[RequestRecord], info: RunInfo) -> dict[str, Any]:
    by_worker = _by([r for r in records if r.worker is not None], "worker")
    out = {}
    for worker in sorted(set(by_worker) | set(info.workers)):
        rs = by_worker.get(worker, [])
        stats = info.workers.get(worker, {})
        busy = stats.get("busy_s")
        out[worker] = {
            "requests": len(rs),
            "tokens_per_s": output_tokens_between(rs, 0.0, info.duration_s) / info.duration_s,
            "busy_fraction": None if busy is None else busy / max(info.end_s, 1e-9),
            "preemptions": stats.get("preemptions"),
        }
    return out


def policy_results(records: Sequence[RequestRecord], info: RunInfo) -> dict[str, Any]:
    """Everything `results.json` holds for one policy (see the module docstring)."""
    by_tenant = _by(records, "tenant")
    tenants = [t for t in info.tenants if by_tenant.get(t)]
    per_tenant = {t: group_metrics(by_tenant[t], 0.0, info.duration_s) for t in tenants}
    total_service = sum(m["service"] for m in per_tenant.values()) or 1.0
    scores = safi(
        {t: per_tenant[t]["slo_violation_rate"] for t in tenants},
        {t: per_tenant[t]["service"] for t in tenants},
    )
    for t in tenants:
        per_tenant[t].update(
            weight=info.weights.get(t, 1.0),
            service_share=per_tenant[t]["service"] / total_service,
            safi=scores[t],
        )
    out = group_metrics(records, 0.0, info.duration_s)
    out.update(
        mean_safi=sum(scores.values()) / len(scores) if scores else 0.0,
        jain_safi=jain(scores.values()),
        jain_service=jain(per_tenant[t]["service"] / info.weights.get(t, 1.0) for t in tenants),
        jain_violations=jain(per_tenant[t]["slo_violation_rate"] for t in tenants),
        max_service_gap=info.max_service_gap,
        service_gap_pair=list(info.gap_pair) if info.gap_pair else None,
        per_tenant=per_tenant,
        per_node=_per_node(records, info.duration_s),
        per_worker=_per_worker(records, info),
        per_phase={
            name: group_metrics([r for r in records if a <= r.arrival < b], a, b)
            for name, a, b in info.phases
        },
        timeseries=timeseries(
            records, info.tenants, info.weights, info.end_s, window_s=info.window_s
        ),
        cdf={
            "e2e_s": cdf_points(r.e2e_s for r in records),
            "ttft_s": cdf_points(r.ttft_s for r in records),
        },
        workflows=workflow_metrics(records),
    )
    return out
