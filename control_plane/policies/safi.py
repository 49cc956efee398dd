"""SAFI — the SLO-aware fairness index of ExFairS (docs/algorithms.md §4.1, §16.1)."""

from __future__ import annotations

from collections.abc import Iterable

from control_plane.core.ledger import Ledger, Node


def safi_scores(
    ledger: Ledger,
    clients: Iterable[Node],
    now: float,
    alpha: float = 0.7,
    *,
    usage_lowers: bool = False,
) -> dict[Node, float]:
    """`SAFI_i = α · SLO_i + (1 − α) · Usage_i` over the ledger's sliding window.

    `SLO_i` = violations / completed (0 when nothing completed); `Usage_i` = windowed service
    (Unified Tokens, `n_in + 2 · n_out` at default prices) over the largest among `clients`
    (0 when nobody was served). Lower is better. With `usage_lowers` the usage term is
    `1 − Usage_i` (ExFairS's `usage: lowers` variant: the exchange then favours light clients).
    """
    windows = {client: ledger.window(client, now) for client in clients}
    top = max((w.service for w in windows.values()), default=0.0)
    out = {}
    for client, w in windows.items():
        usage = w.service / top if top > 0 else 0.0
        if usage_lowers:
            usage = 1.0 - usage
        out[client] = alpha * w.violation_rate + (1.0 - alpha) * usage
    return out


def jain(values: Iterable[float]) -> float:
    """Jain's index `(Σx)² / (n · Σx²)`; 1 when all equal (and for an empty or all-zero set)."""
    xs = list(values)
    squares = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * squares) if squares > 0 else 1.0
