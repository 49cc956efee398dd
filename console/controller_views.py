"""The meta-controller on the policy page: what it runs and why, and its switches against the
violation rate and queue each one saw (pure: data in, figure out)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

SWITCH_COLUMNS = ("at (UTC)", "from", "to", "reason", "violation rate", "queued")


def switch_rows(switches: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per switch: when, from, to, why, and the violation rate and queue it saw."""
    rows = []
    for s in switches:
        view = s.get("view") or {}
        rows.append(
            {
                "t": s.get("t"),
                "from": s.get("from"),
                "to": s.get("to"),
                "reason": s.get("reason"),
                "violation_rate": view.get("violation_rate"),
                "queued": view.get("queued"),
            }
        )
    return rows


def switch_frame(switches: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The switches as the page's table: when (UTC: the leader stamps a switch with its
    epoch clock, which read as a bare number like 1764460000.1), from, to, why, and the
    violation rate and queue it saw."""
    records = [
        (
            None if r["t"] is None else pd.to_datetime(r["t"], unit="s", utc=True),
            r["from"],
            r["to"],
            r["reason"],
            r["violation_rate"],
            r["queued"],
        )
        for r in switch_rows(switches)
    ]
    return pd.DataFrame(records, columns=list(SWITCH_COLUMNS))


def timeline_figure(switches: Sequence[dict[str, Any]]) -> go.Figure:
    """Violation rate (left axis) and queue (right axis) at each switch, labelled with the
    policy switched to; time in seconds since the first switch shown."""
    rows = switch_rows(switches)
    t0 = min((r["t"] for r in rows if r["t"] is not None), default=0.0)
    xs = [(r["t"] or t0) - t0 for r in rows]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=[r["violation_rate"] for r in rows],
            mode="lines+markers+text",
            text=[f"→ {r['to']}" for r in rows],
            textposition="top center",
            name="violation rate",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=xs, y=[r["queued"] for r in rows], mode="lines+markers", name="queued", yaxis="y2"
        )
    )
    fig.update_layout(
        xaxis={"title": "seconds since the first switch shown"},
        yaxis={"title": "violation rate", "range": [0, 1.05]},
        yaxis2={"title": "queued", "overlaying": "y", "side": "right"},
        height=320,
        margin={"t": 30, "b": 40},
    )
    return fig


def limits_line(controller: dict[str, Any]) -> str:
    """The execution loop's per-worker dispatch caps in words (absent or unset: none)."""
    limits = controller.get("limits") or {}
    parts = []
    if limits.get("prefill_tokens") is not None:
        parts.append(f"at most {limits['prefill_tokens']:,} prompt tokens in prefill")
    if limits.get("n_run") is not None:
        parts.append(f"at most {limits['n_run']} requests in flight")
    if limits.get("token_budget") is not None:
        parts.append(f"at most {limits['token_budget']:.0%} of KV capacity reserved")
    if not parts:
        return "Dispatch limits: none (every worker takes what admission allows)."
    return "Dispatch limits per worker: " + "; ".join(parts) + "."


def llm_line(controller: dict[str, Any]) -> str | None:
    """The `llm` selector's record: questions asked and how they ended; None for others."""
    llm = controller.get("llm")
    if not llm:
        return None
    s = llm.get("stats") or {}
    line = (
        f"Model {llm.get('model')}: {s.get('asked', 0)} asked, {s.get('answered', 0)} answered, "
        f"{s.get('invalid', 0)} invalid, {s.get('timeout', 0)} timed out (those fell back to "
        "the rules)."
    )
    if llm.get("last_error"):
        line += f" Last invalid reply: {llm['last_error']}."
    return line
