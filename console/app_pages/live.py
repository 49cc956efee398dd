"""Live: who is getting what right now — per node SAFI, credits, counters, service, queues,
tokens/s and SLO attainment, with a drill-down tenant → applications → agents.

The selectors stay outside the refreshing fragment, so a refresh never loses the operator's
place; each refresh adds a snapshot to this session's rolling history (counters, service and
tokens over time).
"""

from __future__ import annotations

import time
from typing import Any

import streamlit as st

from console import live_views as views
from console import session
from console.admin_client import AdminApiError, AdminClient

ALL = "(all)"


def _header(api: AdminClient, payload: dict[str, Any]) -> None:
    try:
        state: dict[str, Any] | None = api.state()
    except AdminApiError as exc:
        if exc.status != 503:
            raise
        state = None
    cols = st.columns(5)
    if state is None:
        st.warning("No scheduler leader has published live state yet (is the scheduler up?).")
    else:
        cols[0].metric("Leader", str(state.get("leader")))
        cols[1].metric("Policy", str((state.get("policy") or {}).get("name")))
        cols[2].metric("Queued", int(state.get("queue_depth") or 0))
        cols[3].metric("In flight", int(state.get("inflight") or 0))
    jain = payload["jain"]["tenant"]
    cols[4].metric("Jain (tenant SAFI)", f"{jain['safi']:.3f}")


def _charts(payload: dict[str, Any], rows: list[views.Row], history: list[Any]) -> None:
    keys = [r["key"] for r in rows]
    left, right = st.columns(2)
    left.plotly_chart(views.safi_figure(rows, payload["alpha"], payload["beta"]), key="safi")
    right.plotly_chart(
        views.grouped_bars(rows, {"credit": "credit", "resource": "resource"}, "ExFairS credits"),
        key="credits",
    )
    left, right = st.columns(2)
    counters = views.history_frame(history, keys, "counter")
    left.plotly_chart(views.lines_figure(counters, "Virtual counters", "counter"), key="ctr")
    service = views.history_frame(history, keys, "service")
    right.plotly_chart(views.lines_figure(service, "Service (Unified Tokens)", "UT"), key="svc")
    left, right = st.columns(2)
    queues = {"queued": "queued", "in flight": "inflight"}
    left.plotly_chart(views.grouped_bars(rows, queues, "Queue depth"), key="queues")
    rates = views.token_rates(history, keys)
    right.plotly_chart(views.lines_figure(rates, "Tokens per second", "tokens/s"), key="tps")
    slo = {"last minute": "slo_attainment_1m", "last hour": "slo_attainment_1h"}
    st.plotly_chart(views.grouped_bars(rows, slo, "SLO attainment"), key="slo")


def _panel(tenant: str | None, app: str | None) -> None:
    api = session.client()
    try:
        payload = api.nodes()
        _header(api, payload)
    except AdminApiError as exc:
        session.show_error(exc)
        return
    history = views.append_history(st.session_state.get("live_history", []), payload, time.time())
    st.session_state["live_history"] = history
    rows = views.visible_nodes(payload["nodes"], tenant, app)
    where = " / ".join(p for p in (tenant, app) if p) or "all tenants"
    st.subheader(f"Nodes: {where}")
    if not rows:
        st.info("No activity recorded for these nodes yet.")
        return
    st.dataframe(views.nodes_frame(rows), hide_index=True, key="nodes_table")
    _charts(payload, rows, history)


def main() -> None:
    st.title("Live")
    try:
        nodes = session.client().nodes()["nodes"]
    except AdminApiError as exc:
        session.show_error(exc)
        return
    left, right = st.columns(2)
    tenant = left.selectbox("Tenant", [ALL, *views.children(nodes, "tenant")], key="live_tenant")
    app = ALL
    if tenant != ALL:
        apps = views.children(nodes, "app", [tenant])
        app = right.selectbox("Application", [ALL, *apps], key="live_app")
    chosen = (None if tenant == ALL else tenant, None if app == ALL else app)
    st.fragment(run_every=session.refresh_seconds())(_panel)(*chosen)


main()
