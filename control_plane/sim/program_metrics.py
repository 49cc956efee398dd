"""Program-level metrics (Kairos §5.7): what a multi-agent application's user feels.

Per application (`tenant/app`), over its workflows (records sharing a `workflow` id; requests
without one are not programs): end-to-end latency = last call's end − first call's arrival,
and program-level token latency = that latency / the output tokens the workflow generated.
A workflow counts as *completed* when every call it issued ended `ok`; the statistics (mean,
P90, P95, P99) are over completed workflows, the others are counted apart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from control_plane.sim.records import RequestRecord

QUANTILES = (90, 95, 99)


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, **{f"p{q}": None for q in QUANTILES}}
    arr = np.asarray(values, dtype=np.float64)
    return {"mean": float(arr.mean()), **{f"p{q}": float(np.percentile(arr, q)) for q in QUANTILES}}


def workflow_metrics(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """`{tenant/app: {workflows, completed, calls_per_workflow, e2e_s, token_latency_s}}`."""
    by_workflow: dict[tuple[str, str], list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.workflow is not None:
            by_workflow[(f"{r.tenant}/{r.app}", r.workflow)].append(r)
    per_app: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (app, _), calls in by_workflow.items():
        counts[app][0] += 1
        if any(r.status != "ok" or r.finished is None for r in calls):
            continue
        counts[app][1] += 1
        e2e = max(r.finished or 0.0 for r in calls) - min(r.arrival for r in calls)
        tokens = sum(r.n_out for r in calls)
        per_app[app]["e2e_s"].append(e2e)
        per_app[app]["token_latency_s"].append(e2e / max(tokens, 1))
        per_app[app]["calls"].append(float(len(calls)))
    out: dict[str, Any] = {}
    for app in sorted(counts):
        total, completed = counts[app]
        values = per_app[app]
        out[app] = {
            "workflows": total,
            "completed": completed,
            "calls_per_workflow": float(np.mean(values["calls"])) if values["calls"] else None,
            "e2e_s": _stats(values["e2e_s"]),
            "token_latency_s": _stats(values["token_latency_s"]),
        }
    return out
