"""The "Fair and fast" part of the Kairos section of `docs/results.md`: on `kairos-fair`, does
`hmfs` with `order: kairos` keep the chat tenant at its weighted fair share while the workflow
tenant's latency stays near pure `kairos`'s?

Shares are measured over the *contended window*: the seconds of `[0, duration_s]` during which
every tenant had a request waiting at the scheduler (sampled each second; a one-second bin
counts when both its ends are backlogged). Only there does a fair policy owe each tenant
`weight / Σ weights` of the service (VTC's premise); service is placed in time as the
scheduler charges it (`timeseries.service_cumulative`: prompt at dispatch, output as it
streams).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from control_plane.sim.records import RequestRecord
from control_plane.sim.results_format import Results, fmt, table
from control_plane.sim.setup import PolicySpec
from control_plane.sim.timeseries import queued_at, service_cumulative

FAIR_SCENARIO = "kairos-fair"
CHAT_TENANT = "helpdesk"
WORKFLOW_APP = "campus/qa"
FAIR_POLICIES = (
    PolicySpec("hmfs", "hmfs"),
    PolicySpec("hmfs-kairos", "hmfs", {"depth": 2, "order": "kairos"}),
    PolicySpec("kairos", "kairos"),
    PolicySpec("vtc", "vtc"),
    PolicySpec("parrot", "parrot"),
)
"""`hmfs` at its default depth 3 (agents too); `hmfs-kairos` shares by tenant and application
counters and orders each application's turn by Kairos. With one application per tenant, `vtc`
makes the decisions of `hmfs` at depth 2 with FCFS leaves: against `hmfs-kairos`, only the
leaf order differs."""
SHARE_TOLERANCE = 0.05
"""Claim: the chat tenant's contended share within 5 % of its weighted fair share."""
LATENCY_TOLERANCE = 0.10
"""Claim: the workflow tenant's mean workflow latency at most 10 % above pure `kairos`'s."""
STEP_S = 1.0

_CLAIMS = (
    f"Claims: `hmfs-kairos` keeps the chat share within {100 * SHARE_TOLERANCE:.0f} % of its fair"
    " share, and the\nworkflow tenant's mean workflow latency at most"
    f" {100 * LATENCY_TOLERANCE:.0f} % above pure `kairos`'s on the same run."
)
INTRO = f"""### Fair and fast: Kairos's order inside hierarchical fairness (`{FAIR_SCENARIO}`)

The QA workflow (tenant `campus`) beside plain chat (tenant `{CHAT_TENANT}`), weights 1 : 1,
ρ 1.2 on the Kairos pool (scenarios/kairos-fair.yaml). `hmfs-kairos` = `hmfs` with
`depth: 2, order: kairos`: tenants and applications share the pool by their virtual counters,
and the application whose turn it is serves its requests in Kairos's order
(docs/algorithms.md §19.5). `hmfs` = default depth 3 (its agents share too), FCFS leaves;
`vtc` makes here the decisions of `hmfs-kairos` with FCFS leaves (one application a tenant).
Every policy but `parrot` (round-robin) dispatches with `kairos_slots`. `chat share` is the
chat tenant's share of the service in the *contended window* (the seconds of the arrival
window in which both tenants had requests waiting at the scheduler, `contended s`); `vs fair`
its relative deviation from its weighted fair share. Workflow latency (e2e, seconds) and
program token latency (s/token) are those of `{WORKFLOW_APP}`'s completed workflows.
{_CLAIMS}"""


def contended(
    records: Sequence[RequestRecord], tenants: Sequence[str], end: float
) -> dict[str, Any]:
    """`{"seconds", "service": {tenant: Unified Tokens}}` over the bins of `[0, end]` in which
    every one of `tenants` had a request queued (see the module docstring)."""
    grid = np.arange(0.0, end + STEP_S / 2, STEP_S)
    mine = {t: [r for r in records if r.tenant == t] for t in tenants}
    backlogged = np.logical_and.reduce([queued_at(mine[t], grid) > 0 for t in tenants])
    bins = backlogged[:-1] & backlogged[1:]
    service = {t: float(np.diff(service_cumulative(mine[t], grid))[bins].sum()) for t in tenants}
    return {"seconds": float(bins.sum() * STEP_S), "service": service}


def fair_extras(
    records: Sequence[RequestRecord], tenants: Sequence[str], end: float
) -> dict[str, Any]:
    """What `run_job` adds to a `kairos-fair` run's results (the records are not kept)."""
    return {"contended": contended(records, tenants, end)}


def chat_share(r: Mapping[str, Any]) -> tuple[float | None, float]:
    """(the chat tenant's contended share, its weighted fair share)."""
    service = r["contended"]["service"]
    weights = {t: float(r["per_tenant"][t]["weight"]) for t in service}
    fair = weights[CHAT_TENANT] / sum(weights.values())
    total = sum(service.values())
    return (service[CHAT_TENANT] / total if total else None), fair


def deviation(r: Mapping[str, Any]) -> float | None:
    share, fair = chat_share(r)
    return None if share is None else (share - fair) / fair


def _app(r: Mapping[str, Any]) -> Mapping[str, Any]:
    return (r.get("workflows") or {}).get(WORKFLOW_APP) or {}


def _stat(r: Mapping[str, Any], metric: str, stat: str) -> float | None:
    value = (_app(r).get(metric) or {}).get(stat)
    return None if value is None else float(value)


def _change(new: float | None, old: float | None) -> float | None:
    return None if new is None or not old else (new - old) / old


def _pct(change: float | None) -> str:
    return "–" if change is None else f"{100 * change:+.1f}"


def fair_rows(res: Results) -> list[list[str]]:
    rows = []
    for policy, r in res.items():
        share, fair = chat_share(r)
        app = _app(r)
        rows.append(
            [
                policy,
                fmt(share),
                fmt(fair),
                _pct(deviation(r)),
                fmt(r["contended"]["seconds"]),
                fmt(_stat(r, "e2e_s", "mean")),
                fmt(_stat(r, "e2e_s", "p90")),
                fmt(_stat(r, "token_latency_s", "mean"), 4),
                fmt(_stat(r, "token_latency_s", "p90"), 4),
                f"{app.get('completed', 0)}/{app.get('workflows', 0)}",
                fmt(r.get("queue_mean_s"), 3),
            ]
        )
    return rows


def fair_claims(res: Results) -> list[str]:
    """The two claims on `hmfs-kairos`, PASS or FAIL with their numbers."""
    ours, kairos = res.get("hmfs-kairos"), res.get("kairos")
    if not (ours and kairos):
        return ["- incomplete: hmfs-kairos and kairos are both needed"]
    dev = deviation(ours)
    share, fair = chat_share(ours)
    fair_ok = dev is not None and abs(dev) <= SHARE_TOLERANCE
    mine, theirs = _stat(ours, "e2e_s", "mean"), _stat(kairos, "e2e_s", "mean")
    change = _change(mine, theirs)
    fast_ok = change is not None and change <= LATENCY_TOLERANCE
    token_change = _change(
        _stat(ours, "token_latency_s", "mean"), _stat(kairos, "token_latency_s", "mean")
    )
    lines = [
        f"- fair: {'PASS' if fair_ok else 'FAIL'} — chat share {fmt(share)} against a fair "
        f"{fmt(fair)} ({_pct(dev)} %, tolerance ±{100 * SHARE_TOLERANCE:.0f} %)",
        f"- fast: {'PASS' if fast_ok else 'FAIL'} — mean workflow latency {fmt(mine)} s against "
        f"kairos's {fmt(theirs)} s ({_pct(change)} %, tolerance +{100 * LATENCY_TOLERANCE:.0f} %);"
        f" program token latency {_pct(token_change)} %",
    ]
    return lines + _contrast(res)


def _contrast(res: Results) -> list[str]:
    """What the composition changed: the share kairos alone gives the chat tenant, and what
    Kairos's order gains over FCFS leaves under the same counters (`vtc`)."""
    kairos, ours, vtc = res["kairos"], res["hmfs-kairos"], res.get("vtc")
    out = [
        f"- for contrast: under kairos alone the chat share is {_pct(deviation(kairos))} % off fair"
    ]
    if vtc:
        gains = [
            f"{what} {_pct(_change(_stat(ours, metric, stat), _stat(vtc, metric, stat)))} %"
            for what, metric, stat in (
                ("mean workflow latency", "e2e_s", "mean"),
                ("program token latency mean", "token_latency_s", "mean"),
                ("P90", "token_latency_s", "p90"),
            )
        ]
        out.append("- Kairos's order against FCFS leaves (vtc): " + ", ".join(gains))
    return out


def fair_section(res: Results) -> str:
    header = [
        "policy",
        "chat share",
        "fair share",
        "vs fair %",
        "contended s",
        "wf mean s",
        "wf P90 s",
        "mean s/token",
        "P90 s/token",
        "done",
        "queue mean s",
    ]
    claims = "Claims (hmfs-kairos):\n" + "\n".join(fair_claims(res))
    return "\n\n".join([INTRO, table(header, fair_rows(res)), claims])
