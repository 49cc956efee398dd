"""Pure builders of the Reports page's "Service per model kind" section from
`/admin/reports/service-by-kind` JSON (the API's numbers, unchanged): a table with one row per
(tenant, kind) and a bar chart of unified service per tenant, stacked by model kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

COLUMNS = ("tenant", "kind", "requests", "images", "n_in", "n_out", "unified_service", "share")


def kind_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per (tenant, kind), in the API's order, with every figure (share of the kind's
    unified service in 0..1)."""
    return pd.DataFrame(
        [{c: row.get(c) for c in COLUMNS} for row in report["data"]], columns=list(COLUMNS)
    )


def for_tenant(report: Mapping[str, Any], tenant: str | None) -> dict[str, Any]:
    """The report narrowed to one tenant's rows (None: unchanged); shares stay those of every
    tenant's service on the kind, and `kinds` keeps only the kinds the tenant used."""
    if tenant is None:
        return dict(report)
    data = [r for r in report["data"] if r["tenant"] == tenant]
    used = {r["kind"] for r in data}
    kinds = [k for k in report["kinds"] if k in used]
    return {**report, "data": data, "tenants": [tenant] if data else [], "kinds": kinds}


def kind_service(report: Mapping[str, Any], kind: str) -> list[float]:
    """The unified service of every tenant (in `report["tenants"]` order) on `kind`; 0 where
    the tenant used no model of that kind."""
    by_tenant = {
        r["tenant"]: float(r["unified_service"]) for r in report["data"] if r["kind"] == kind
    }
    return [by_tenant.get(t, 0.0) for t in report["tenants"]]


def kind_figure(report: Mapping[str, Any]) -> go.Figure:
    """Tenants on x, unified service (Unified Tokens) on y, one stacked bar segment per kind;
    a bar's height is the tenant's service over every kind."""
    tenants = list(report["tenants"])
    fig = go.Figure([go.Bar(x=tenants, y=kind_service(report, k), name=k) for k in report["kinds"]])
    fig.update_layout(
        barmode="stack",
        title="Service per model kind",
        yaxis_title="Unified Tokens",
        legend_title="model kind",
        height=320,
    )
    return fig
