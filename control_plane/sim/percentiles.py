"""Mean and percentiles of latency samples (numpy's linear interpolation between order stats)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

QUANTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0))


def summary(values: Iterable[float | None], prefix: str) -> dict[str, float | None]:
    """`{prefix_mean_s, prefix_p50_s, prefix_p90_s, prefix_p99_s}`; None values are skipped and
    an empty sample gives None everywhere (JSON null)."""
    xs = np.fromiter((v for v in values if v is not None), dtype=np.float64)
    if xs.size == 0:
        return {f"{prefix}_{k}_s": None for k in ("mean", *(name for name, _ in QUANTILES))}
    out: dict[str, float | None] = {f"{prefix}_mean_s": float(xs.mean())}
    points = np.percentile(xs, [q for _, q in QUANTILES])
    out.update(
        {f"{prefix}_{name}_s": float(p) for (name, _), p in zip(QUANTILES, points, strict=True)}
    )
    return out


def cdf_points(values: Iterable[float | None], points: int = 101) -> list[float]:
    """`points` evenly spaced quantiles from 0 to 100 % (empty list for no samples)."""
    xs = np.fromiter((v for v in values if v is not None), dtype=np.float64)
    if xs.size == 0:
        return []
    return [float(v) for v in np.percentile(xs, np.linspace(0.0, 100.0, points))]
