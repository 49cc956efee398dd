"""The results document of a live replay: the simulator's shape, from client-side records.

The service gap cannot be read from a ledger here; it is estimated from the records on a
0.5 s grid (service placed in time as in the time series, backlog = queued by the records).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from control_plane.sim.gap import GapTracker
from control_plane.sim.metrics import policy_results
from control_plane.sim.records import RequestRecord
from control_plane.sim.runner import SCHEMA, run_info, scenario_header
from control_plane.sim.scenario import Scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.timeseries import queued_at, service_cumulative


def record_gap(
    records: Sequence[RequestRecord],
    tenants: Sequence[str],
    weights: Mapping[str, float],
    end: float,
    step: float = 0.5,
) -> tuple[float, tuple[str, str] | None]:
    """Largest service gap between backlogged tenants, estimated on a `step` grid."""
    grid = np.arange(0.0, end + step, step, dtype=np.float64)
    by_tenant = {t: [r for r in records if r.tenant == t] for t in tenants}
    service = np.array(
        [service_cumulative(by_tenant[t], grid) / weights.get(t, 1.0) for t in tenants]
    )
    queued = np.array(
        [queued_at(by_tenant[t], grid) if by_tenant[t] else np.zeros(grid.shape) for t in tenants]
    )
    tracker = GapTracker(tenants)
    for k in range(grid.size):
        column = service[:, k]
        for i, tenant in enumerate(tenants):
            if queued[i, k] > 0:
                tracker.join(tenant, column)
            else:
                tracker.leave(tenant, column)
        tracker.sample(column)
    return tracker.worst, tracker.worst_pair


def live_document(
    scenario: Scenario, records: list[RequestRecord], policy: PolicySpec, speed: float
) -> dict[str, Any]:
    """`{"schema", "scenario", "results": {label: …}}` with `scenario.source == "live"`."""
    end = max([scenario.duration_s] + [r.finished for r in records if r.finished is not None])
    info = run_info(scenario, end)
    info.max_service_gap, info.gap_pair = record_gap(records, info.tenants, info.weights, end)
    header = scenario_header(scenario, "live")
    header["speed"] = speed
    results = {"policy": policy.name, "params": {}, **policy_results(records, info)}
    return {"schema": SCHEMA, "scenario": header, "results": {policy.label: results}}
