"""Live: who is getting what right now — per node demand against received and entitled,
queues and waits, a starved / over-served status, SLO attainment, and (under a policy that
keeps them) SAFI and credits, with a drill-down tenant → applications → agents. The snapshot's
age is shown ("as of N s ago"); one older than `live_views.STALE_AFTER_S` is flagged stale (a
red error and a "stale" mark on every header figure): a scheduler that stopped leaves its last
numbers behind.

The selectors stay outside the refreshing fragment, so a refresh never loses the operator's
place. The time series come from the server (`/admin/live/history`: the leader's rolling
history up to an hour, the SQL minute rollups beyond); the range picker is kept in the URL
(`?range=`) and in the session, so it survives reloads, deep links and page switches.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from console import live_views as views
from console import session
from console.admin_client import AdminApiError

ALL = "(all)"
RANGE_PARAM = "range"
# the picked range outside the widget's own state, which Streamlit drops on a page switch (a
# comment, not a string under it: Streamlit's magic would write a bare string on the page)
KEPT_RANGE = "live_range_kept"


def _freshness(payload: dict[str, Any]) -> dict[str, Any]:
    """How old the leader's snapshot is: a stale one (`views.STALE_AFTER_S`) gets a red error
    and every figure of the header a red "stale" delta; returns the header's metric options."""
    age, stale = views.staleness(payload)
    if age is None:
        return {}
    at = views.as_of(payload)
    if not stale:
        st.caption(
            f"Live state as of {at} ({age:.0f} s old when read; leader {payload.get('leader')})."
        )
        return {}
    st.error(
        f"Live state is stale: the scheduler leader {payload.get('leader')!r} last published "
        f"{age:.0f} s ago (it publishes every {views.PUBLISH_PERIOD_S:g} s). Every number below "
        "is from then, not now: is the scheduler running?"
    )
    st.caption(f"Live state as of {at} ({age:.0f} s old when read): stale.")
    return {"delta": f"stale: {age:.0f} s old", "delta_color": "red", "delta_arrow": "off"}


def _header(payload: dict[str, Any]) -> None:
    """Totals of the same snapshot as the table (`/admin/nodes`), so the two always agree;
    its age first, and every figure marked when the snapshot is stale."""
    live = views.has_leader(payload)
    if not live:
        st.warning(
            "No scheduler leader has published live state yet (is the scheduler up?): "
            "demand, entitlement, waits and status are unknown (—)."
        )
    mark = _freshness(payload)
    totals = payload.get("totals") or {}
    top = st.columns(4)
    top[0].metric("Leader", str(payload.get("leader") or "—"), **mark)
    top[1].metric("Policy", str(payload.get("policy") or "—"), **mark)
    starved = int(totals.get("starved", 0)) if live else views.MISSING
    top[2].metric("Starved nodes", starved, **mark)
    top[3].metric("Jain (tenant SAFI)", views.jain_text(payload), **mark)
    low = st.columns(5)
    low[0].metric("Queued (scheduler)", int(totals.get("queued", 0)), **mark)
    low[1].metric("In flight", int(totals.get("inflight", 0)), **mark)
    engines = int(totals.get("waiting_in_engines", 0)) if live else views.MISSING
    low[2].metric("Waiting in engines", engines, **mark)
    demand = f"{float(totals.get('demand_rate', 0.0)):,.1f}" if live else views.MISSING
    low[3].metric("Demand (UT/s)", demand, **mark)
    low[4].metric("Received (UT/s)", f"{float(totals.get('service_rate', 0.0)):,.1f}", **mark)
    st.caption(
        "Queued counts requests waiting for the scheduler; a request the scheduler admitted to "
        "a worker is in flight, even while it waits inside the engine (Waiting in engines). "
        f"Rates are over the last {float(payload.get('window_s') or 60):g} s. Jain's index is "
        "over the tenants active in that window (— when none is)."
    )


def _table(payload: dict[str, Any], rows: list[views.Row]) -> None:
    frame = views.nodes_frame(rows, payload.get("policy"))
    key = views.key_label(rows)
    st.dataframe(
        frame,
        hide_index=True,
        key="nodes_table",
        column_config={key: st.column_config.TextColumn(key, pinned=True)},
    )
    flags = views.flagged(rows)
    if flags["starved"]:
        st.error(f"Starved: {', '.join(flags['starved'])}")
    if flags["over-served"]:
        st.warning(f"Over-served: {', '.join(flags['over-served'])}")
    tolerance = payload.get("tolerance")
    threshold = payload.get("wait_threshold_s")
    age, stale = views.staleness(payload)
    as_of = f"**Stale: as of {age:.0f} s ago.** " if stale and age is not None else ""
    st.caption(
        f"{as_of}Status rule (tolerance {tolerance if tolerance is not None else '—'}, wait "
        f"threshold {threshold if threshold is not None else '—'} s): "
        f"{payload.get('status_rule', '')} Shares are of what the siblings received together; "
        "UT = Unified Tokens."
    )


def _charts(payload: dict[str, Any], rows: list[views.Row], history: dict[str, Any]) -> None:
    left, right = st.columns(2)
    left.plotly_chart(views.load_figure(rows), key="load")
    waits = {"p95 wait": "wait_p95_s", "oldest queued": "oldest_wait_s"}
    right.plotly_chart(views.grouped_bars(rows, waits, "Queue wait (s)"), key="waits")
    if payload.get("policy") in views.CREDIT_POLICIES:
        left, right = st.columns(2)
        left.plotly_chart(views.safi_figure(rows, payload["alpha"], payload["beta"]), key="safi")
        credits = {"credit": "credit", "resource": "resource"}
        right.plotly_chart(views.grouped_bars(rows, credits, "ExFairS credits"), key="credits")
    figures = [*views.history_figures(history), ("slo", views.slo_figure(rows))]
    for start in range(0, len(figures), 2):
        for column, (key, figure) in zip(st.columns(2), figures[start : start + 2], strict=False):
            column.plotly_chart(figure, key=key)
    sources = {
        "redis": "the leader's rolling history",
        "rollups": "the SQL minute rollups (by arrival minute; no counters, demand or waits)",
    }
    if history.get("source") in sources:
        step = float(history.get("step_s") or 0)
        st.caption(
            f"Time series from {sources[history['source']]}, one point per {step:g} s; "
            "times in UTC."
        )


def _history(range_s: int, tenant: str | None, app: str | None) -> dict[str, Any]:
    try:
        return session.client().live_history(range_s=range_s, **views.history_query(tenant, app))
    except AdminApiError as exc:
        session.show_error(exc)
        return {}


def _panel(tenant: str | None, app: str | None, range_s: int) -> None:
    api = session.client()
    try:
        payload = api.nodes()
    except AdminApiError as exc:
        session.show_error(exc)
        return
    _header(payload)
    rows = views.known_rows(payload, views.visible_nodes(payload["nodes"], tenant, app))
    where = " / ".join(p for p in (tenant, app) if p) or "all tenants"
    st.subheader(f"Nodes: {where}")
    if not rows:
        st.info("No activity recorded for these nodes yet.")
        return
    _table(payload, rows)
    _charts(payload, rows, _history(range_s, tenant, app))


def _picked_range() -> int:
    """The range picker: the URL's `?range=` first (a reload or a deep link), then what this
    session picked last (a page switch), then the default; written back to both."""
    if "live_range" not in st.session_state:
        wanted = st.query_params.get(RANGE_PARAM) or st.session_state.get(KEPT_RANGE)
        st.session_state["live_range"] = views.range_key(wanted)
    picked = st.radio(
        "Range",
        list(views.RANGES),
        key="live_range",
        horizontal=True,
        format_func=lambda k: views.RANGES[k][1],
    )
    st.session_state[KEPT_RANGE] = picked
    st.query_params[RANGE_PARAM] = picked
    return views.RANGES[picked][0]


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
    range_s = _picked_range()
    st.fragment(run_every=session.refresh_seconds())(_panel)(*chosen, range_s)


main()
