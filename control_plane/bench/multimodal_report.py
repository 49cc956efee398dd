"""What `arbiter bench hmfs-multimodal` measures, from the records of either side.

Rule: everything is measured over the contended window, the arrivals' `[0, end]` (afterwards
the drain serves every backlog in full, so whole-run totals only restate demand), with the
timeseries' placement of service (the prompt at dispatch, the output spread from the first
token to the end — an image's, which does not stream, at its end, on both sides). Each
tenant's share of unified service, live vs simulated, agrees when their relative difference
is within the tolerance. The breakdown per tenant and model (requests arrived, dispatched
and finished in the window, service, mean queue wait) says which part of a tenant's share
differs: one image is ~120k Unified Tokens (its prompt at dispatch, 28 steps at its end), a
few points of the window's service, so a share differs by whole images when the two sides
dispatch a different image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from control_plane.core.unified import unified_cost
from control_plane.sim.records import RequestRecord
from control_plane.sim.timeseries import service_cumulative

HELPER, SWARM = ("acme", "helper"), ("acme", "swarm")


def window_service(records: Sequence[RequestRecord], end: float) -> dict[str, float]:
    """Unified service each tenant received during `[0, end]` (scenario seconds)."""
    at = np.array([-1.0, end], dtype=np.float64)  # before 0: what happens at 0 counts
    out: dict[str, float] = {}
    for tenant in sorted({r.tenant for r in records}):
        cum = service_cumulative([r for r in records if r.tenant == tenant], at)
        out[tenant] = float(cum[1] - cum[0])
    return out


def shares(service: Mapping[str, float]) -> dict[str, float]:
    """Each key's share of the total."""
    total = sum(service.values())
    return {k: v / total if total else 0.0 for k, v in service.items()}


def raw_token_shares(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Each tenant's share of raw tokens served (prompt + output, no factor)."""
    tokens: dict[str, float] = {}
    for r in records:
        served = (r.n_in if r.dispatched is not None else 0) + r.n_out
        tokens[r.tenant] = tokens.get(r.tenant, 0.0) + served
    return shares(tokens)


def claims(records: Sequence[RequestRecord], end: float) -> dict[str, float | None]:
    """The HMFS claims' numbers over `[0, end]`: what `acme/helper` (one agent) received over
    the demand that arrived in it, the same for `acme/swarm` (ten agents), and helper's share
    of acme's service."""
    out: dict[str, float | None] = {}
    service: dict[str, float] = {}
    for name, (tenant, app) in (("helper", HELPER), ("swarm", SWARM)):
        mine = [r for r in records if r.tenant == tenant and r.app == app]
        got = window_service(mine, end).get(tenant, 0.0)
        demand = sum(
            unified_cost(r.n_in, r.length, r.unit_factor) for r in mine if r.arrival <= end
        )
        service[name] = got
        out[f"{name}_served_over_demand"] = got / demand if demand else None
    acme = service["helper"] + service["swarm"]
    out["helper_share_of_acme"] = service["helper"] / acme if acme else None
    return out


def by_model(records: Sequence[RequestRecord], end: float) -> list[dict[str, Any]]:
    """Per tenant and model, over `[0, end]`: requests arrived, dispatched and finished `ok`
    in it, their unified service and its share of everyone's, the mean queue wait of those
    that arrived in it (of the dispatched ones), and the statuses of all."""
    groups: dict[tuple[str, str], list[RequestRecord]] = {}
    for r in records:
        groups.setdefault((r.tenant, r.model), []).append(r)
    service = {key: window_service(rows, end).get(key[0], 0.0) for key, rows in groups.items()}
    total = sum(service.values())
    out = []
    for (tenant, model), rows in sorted(groups.items()):
        waits = [r.queue_s for r in rows if r.arrival <= end and r.queue_s is not None]
        statuses: dict[str, int] = {}
        for r in rows:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        out.append(
            {
                "tenant": tenant,
                "model": model,
                "arrived": sum(r.arrival <= end for r in rows),
                "dispatched": sum(r.dispatched is not None and r.dispatched <= end for r in rows),
                "finished": sum(
                    r.status == "ok" and r.finished is not None and r.finished <= end for r in rows
                ),
                "service": service[(tenant, model)],
                "share": service[(tenant, model)] / total if total else 0.0,
                "queue_mean_s": sum(waits) / len(waits) if waits else None,
                "statuses": statuses,
            }
        )
    return out


def agreement(
    live: Sequence[RequestRecord], sim: Sequence[RequestRecord], end: float, tolerance: float
) -> list[dict[str, Any]]:
    """Per tenant: simulated and live share, their relative difference, whether it agrees."""
    live_shares, sim_shares = shares(window_service(live, end)), shares(window_service(sim, end))
    rows = []
    for tenant in sorted(sim_shares):
        a, b = sim_shares[tenant], live_shares.get(tenant, 0.0)
        rel = abs(b - a) / a if a else None
        ok = rel is not None and rel <= tolerance
        rows.append({"tenant": tenant, "sim": a, "live": b, "relative": rel, "agrees": ok})
    return rows
