"""Compare two `results.json` files per tenant (sim vs live, or two policies).

The sim-vs-live check of the issue reads one metric (default `queue_mean_s`) per tenant from
each file and reports the relative difference `|a − b| / max(|a|, |b|)`; a tenant agrees when
that is within the tolerance (default 20 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TenantDiff:
    tenant: str
    a: float | None
    b: float | None

    @property
    def relative(self) -> float | None:
        if self.a is None or self.b is None:
            return None
        scale = max(abs(self.a), abs(self.b))
        return abs(self.a - self.b) / scale if scale > 0 else 0.0


def _only(doc: dict[str, Any], label: str | None) -> dict[str, Any]:
    results: dict[str, Any] = doc["results"]
    if label is not None:
        return dict(results[label])
    if not results:
        raise ValueError("the file holds no policy's results")
    if len(results) != 1:
        raise ValueError(f"several policies in the file ({', '.join(results)}): pick one")
    return dict(next(iter(results.values())))


def compare(
    a: dict[str, Any],
    b: dict[str, Any],
    metric: str = "queue_mean_s",
    label_a: str | None = None,
    label_b: str | None = None,
) -> list[TenantDiff]:
    """One `TenantDiff` per tenant present in either document."""
    ra, rb = _only(a, label_a)["per_tenant"], _only(b, label_b)["per_tenant"]
    known = sorted({name for row in [*ra.values(), *rb.values()] for name in row or {}})
    if known and metric not in known:  # a typo would compare nothing and say "differs"
        raise ValueError(f"--metric: unknown metric {metric!r} (known: {', '.join(known)})")
    tenants = list(dict.fromkeys([*ra, *rb]))
    return [
        TenantDiff(t, (ra.get(t) or {}).get(metric), (rb.get(t) or {}).get(metric)) for t in tenants
    ]
