"""Fairness and SLO metrics computed from request records (docs/algorithms.md §16).

- SAFI per client: `α · SLO_i + (1 − α) · Usage_i`, `SLO_i` = violating / final requests of
  `i`, `Usage_i` = `service_i / max_j service_j` (0 when nobody was served), α = 0.7.
- ESG (H-MAS eq. 6): `Σ_r V_r · min(1, (SLO_ttlt_r / TTLT_r)^α)` over served requests,
  `V_r = 1·n_in + 2·n_out`, `TTLT` = time to the last token, `SLO_ttlt` = the e2e target, else
  `SLO_ttft + n_out · SLO_tpot` from whichever of the two is set; a request without targets
  scores `V_r`; one that was not served scores 0.
- Jain's index: `control_plane.policies.safi.jain` (the policies' own definition).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from control_plane.policies.safi import jain
from control_plane.sim.records import RequestRecord

__all__ = ["esg", "esg_value", "jain", "safi", "violation_rate"]


def violation_rate(records: Iterable[RequestRecord]) -> float:
    """Violating requests over all requests (a request never served violates if it has targets)."""
    total = violated = 0
    for r in records:
        total += 1
        violated += r.violated()
    return violated / total if total else 0.0


def safi(
    violation: Mapping[str, float], service: Mapping[str, float], alpha: float = 0.7
) -> dict[str, float]:
    """SAFI per client from its violation rate and its service (keys of `violation`)."""
    top = max((service.get(c, 0.0) for c in violation), default=0.0)
    return {
        c: alpha * v + (1.0 - alpha) * (service.get(c, 0.0) / top if top > 0 else 0.0)
        for c, v in violation.items()
    }


def esg_value(r: RequestRecord, alpha: float = 1.0) -> float:
    """One request's contribution to ESG (see the module docstring)."""
    e2e = r.e2e_s
    if r.status != "ok" or e2e is None:
        return 0.0
    value = 1.0 * r.n_in + 2.0 * r.n_out
    slo = r.slo
    if slo.e2e_s is not None:
        target: float | None = slo.e2e_s
    elif slo.ttft_s is not None or slo.tpot_s is not None:
        target = (slo.ttft_s or 0.0) + r.n_out * (slo.tpot_s or 0.0)
    else:
        target = None
    if target is None or e2e <= 0:
        return value
    return value * min(1.0, float((target / e2e) ** alpha))


def esg(records: Iterable[RequestRecord], alpha: float = 1.0) -> float:
    return sum(esg_value(r, alpha) for r in records)
