"""Per-bin (default 10 s) time series computed from request records.

Service is placed in time as the scheduler charges it: the prompt at dispatch, output tokens
spread evenly from the first token to the end of the request (they stream). SAFI at a bin's
end uses the trailing `window_s` (the ledger's window, 60 s by default): violations among
requests that ended in the window, usage from service in the window. Jain's index at a bin
is taken over the tenants active in it (served in it, or with requests queued at its end).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from control_plane.core.unified import unified_cost
from control_plane.sim.fairness_metrics import jain, safi
from control_plane.sim.records import RequestRecord

Array = npt.NDArray[np.float64]


def ramp_cumulative(start: Array, end: Array, amount: Array, at: Array) -> Array:
    """`Σ_r amount_r · clip((t − start_r) / (end_r − start_r), 0, 1)` at every `t` in `at`.

    Each amount accrues linearly over its interval (all at once when `end == start`).
    O((N + T) log N) by prefix sums over the sorted starts and ends.
    """
    width = end - start
    point = width <= 0
    out = np.zeros(at.shape, dtype=np.float64)
    if point.any():
        order = np.argsort(end[point], kind="stable")
        cum = np.concatenate(([0.0], np.cumsum(amount[point][order])))
        out += cum[np.searchsorted(end[point][order], at, side="right")]
    ramp = ~point
    if ramp.any():
        s, e, rate = start[ramp], end[ramp], amount[ramp] / width[ramp]
        for bound, sign in ((s, 1.0), (e, -1.0)):
            order = np.argsort(bound, kind="stable")
            r_cum = np.concatenate(([0.0], np.cumsum(rate[order])))
            rb_cum = np.concatenate(([0.0], np.cumsum(rate[order] * bound[order])))
            k = np.searchsorted(bound[order], at, side="right")
            out += sign * (at * r_cum[k] - rb_cum[k])
    return out


def service_cumulative(records: Sequence[RequestRecord], at: Array) -> Array:
    dispatched = [r for r in records if r.dispatched is not None]
    if not dispatched:
        return np.zeros(at.shape)
    t_in = np.array([r.dispatched for r in dispatched], dtype=np.float64)
    cost_in = np.array([unified_cost(r.n_in, 0, r.unit_factor) for r in dispatched])
    cum = ramp_cumulative(t_in, t_in, cost_in, at)
    return cum + _output_cumulative(dispatched, at, unified=True)


def _output_cumulative(records: Sequence[RequestRecord], at: Array, unified: bool) -> Array:
    rows = [r for r in records if r.n_out > 0 and r.finished is not None]
    if not rows:
        return np.zeros(at.shape)
    a = np.array([r.first_token if r.first_token is not None else r.dispatched for r in rows])
    b = np.array([r.finished for r in rows], dtype=np.float64)
    amount = np.array(
        [unified_cost(0, r.n_out, r.unit_factor) if unified else r.n_out for r in rows]
    )
    return ramp_cumulative(a.astype(np.float64), b, amount, at)


def output_tokens_between(records: Sequence[RequestRecord], t0: float, t1: float) -> float:
    """Output tokens streamed during `[t0, t1]` (tokens spread evenly over each request)."""
    at = np.array([t0, t1], dtype=np.float64)
    cum = _output_cumulative(records, at, unified=False)
    return float(cum[1] - cum[0])


def queued_at(records: Sequence[RequestRecord], at: Array) -> Array:
    arrivals = np.sort(np.array([r.arrival for r in records], dtype=np.float64))
    left = [r.dispatched if r.dispatched is not None else r.finished for r in records]
    leaves = np.sort(np.array([t for t in left if t is not None], dtype=np.float64))
    n_in = np.searchsorted(arrivals, at, side="right")
    return (n_in - np.searchsorted(leaves, at, side="right")).astype(np.float64)


def _window_violations(records: Sequence[RequestRecord], at: Array, window: float) -> Array:
    ends = [(r.finished, r.violated()) for r in records if r.finished is not None]
    if not ends:
        return np.zeros(at.shape)
    t = np.array([e for e, _ in ends], dtype=np.float64)
    v = np.array([float(bad) for _, bad in ends])
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    cum_n = np.arange(t.size + 1, dtype=np.float64)
    cum_v = np.concatenate(([0.0], np.cumsum(v)))
    hi, lo = np.searchsorted(t, at, side="right"), np.searchsorted(t, at - window, side="right")
    done = cum_n[hi] - cum_n[lo]
    rate: Array = np.divide(cum_v[hi] - cum_v[lo], done, out=np.zeros(at.shape), where=done > 0)
    return rate


def timeseries(
    records: Sequence[RequestRecord],
    tenants: Sequence[str],
    weights: Mapping[str, float],
    end: float,
    bin_s: float = 10.0,
    window_s: float = 60.0,
) -> dict[str, Any]:
    """Bins of `bin_s` over `[0, end]` (see the module docstring); lists are per bin."""
    edges = np.arange(0.0, end + bin_s, bin_s, dtype=np.float64)
    at, before = edges[1:], np.maximum(edges[1:] - window_s, 0.0)
    by_tenant = {t: [r for r in records if r.tenant == t] for t in tenants}
    cum = {t: service_cumulative(rs, edges) for t, rs in by_tenant.items()}
    in_bin = {t: np.diff(c) for t, c in cum.items()}
    win_service = {t: np.interp(at, edges, c) - np.interp(before, edges, c) for t, c in cum.items()}
    win_violation = {t: _window_violations(rs, at, window_s) for t, rs in by_tenant.items()}
    queued = {t: queued_at(rs, at) if rs else np.zeros(at.shape) for t, rs in by_tenant.items()}
    out_cum = _output_cumulative(records, edges, unified=False)
    series: dict[str, Any] = {
        "t": [float(x) for x in at],
        "service": {t: [float(x) for x in v] for t, v in in_bin.items()},
        "queued": {t: [int(x) for x in v] for t, v in queued.items()},
        "tokens_per_s": [float(x) for x in np.diff(out_cum) / bin_s],
        "safi": {t: [] for t in tenants},
        "jain_service": [],
        "jain_safi": [],
    }
    for k in range(at.size):
        scores = safi(
            {t: float(win_violation[t][k]) for t in tenants},
            {t: float(win_service[t][k]) for t in tenants},
        )
        active = [t for t in tenants if in_bin[t][k] > 0 or queued[t][k] > 0]
        for t in tenants:
            series["safi"][t].append(scores[t])
        series["jain_service"].append(jain(in_bin[t][k] / weights.get(t, 1.0) for t in active))
        series["jain_safi"].append(jain(scores[t] for t in active))
    return series
