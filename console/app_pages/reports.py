"""Reports: a date range and a level → per node requests, tokens, unified service, share
against weight, SLO-violation rate, latency percentiles, SAFI and Jain's index (for the period
and over time); download as CSV (the API's own) or JSON. Below, the service each tenant
received per model kind (llm, vlm, image, video, audio) over the same dates, and the
program-level view: per application, how long its workflows took end to end and per output
token, and each worker's preemptions."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import streamlit as st

from console import kind_views, session
from console import report_views as views
from console.admin_client import AdminApiError
from console.live_views import STALE_AFTER_S

LEVELS = ("tenant", "app", "agent")


def _params() -> dict[str, Any]:
    today = dt.datetime.now(dt.UTC).date()
    with st.form("report"):
        left, right = st.columns(2)
        start = left.date_input("From (UTC)", value=today - dt.timedelta(days=7), key="rep_from")
        end = right.date_input("To (UTC, inclusive)", value=today, key="rep_to")
        level = st.radio("Level", LEVELS, horizontal=True, key="rep_level")
        tenant = st.text_input("Only tenant (optional)", key="rep_tenant")
        st.form_submit_button("Run report", key="report_submit")
    assert isinstance(start, dt.date) and isinstance(end, dt.date)
    return {
        "from": start.isoformat(),
        "to": (end + dt.timedelta(days=1)).isoformat(),
        "level": level,
        "tenant": tenant.strip() or None,
    }


def _show(report: dict[str, Any], params: dict[str, Any]) -> None:
    cols = st.columns(4)
    cols[0].metric("Nodes", len(report["nodes"]))
    jain = views.period_jain_service(report)
    cols[1].metric("Jain: service / weight", "—" if jain is None else f"{jain:.3f}")
    cols[2].metric("Jain: violation rate", f"{report['jain_violation_rate']:.3f}")
    cols[3].metric("Jain: SAFI", f"{report['jain_safi']:.3f}")
    if jain is None:
        st.warning(
            "Nobody was served in this period (every request ended in an error, a timeout, "
            "an abort or a withdrawal): service per weight has no Jain's index (—), it is "
            "neither fair nor unfair."
        )
    st.dataframe(views.report_frame(report), hide_index=True, key="report_table")
    left, right = st.columns(2)
    left.plotly_chart(views.share_figure(report), key="report_share")
    left.caption(
        "Entitled given demand = weighted max-min fair share of the service delivered, down "
        "the hierarchy (among tenants, then each tenant's among its apps, then agents), given "
        "each node's demand (its served requests, plus failed ones at their mean cost): a node "
        "that asked for less than its weight's part is entitled to what it asked, not starved. "
        "The table's entitled_share is by weight alone."
    )
    right.plotly_chart(views.jain_figure(report), key="report_jain")
    right.caption("Windows in which nobody was served have no index (a gap, not 1.0).")
    name = f"arbiter-report-{params['level']}-{params['from']}-{params['to']}"
    csv = session.client().report_csv(**params)
    left, right = st.columns(2)
    left.download_button("Download CSV", csv, f"{name}.csv", "text/csv", key="dl_csv")
    right.download_button(
        "Download JSON",
        views.report_json_bytes(report),
        f"{name}.json",
        "application/json",
        key="dl_json",
    )


def _kinds(params: dict[str, Any]) -> None:
    st.subheader("Service per model kind")
    everyone = session.client().service_by_kind(params["from"], params["to"])
    kinds = kind_views.for_tenant(everyone, params["tenant"])
    if not kinds["data"]:
        st.info("No requests in this period.")
        return
    st.caption("Unified Tokens per tenant; share = the tenant's part of the kind's service.")
    st.plotly_chart(kind_views.kind_figure(kinds), key="kind_chart")
    st.dataframe(kind_views.kind_frame(kinds), hide_index=True, key="kind_table")


def _programs(params: dict[str, Any]) -> None:
    st.subheader("Workflows (program-level)")
    report = session.client().program_report(params["from"], params["to"], tenant=params["tenant"])
    if report["data"]:
        st.caption(
            "Workflows whose first call arrived in the period. End-to-end = last call's end − "
            "first call's arrival; token latency = end-to-end / output tokens of all its calls. "
            "Statistics over completed workflows (every call ended ok)."
        )
        st.dataframe(views.program_frame(report), hide_index=True, key="program_table")
    else:
        st.info("No workflows started in this period.")
    st.markdown("**Preemptions per worker**")
    live = report["preemptions"]
    if not live["data"]:
        none = "No scheduler leader publishes" if live["updated_at"] is None else "No workers in"
        st.info(f"{none} the live view.")
        return
    age = time.time() - float(live["updated_at"])
    if age > STALE_AFTER_S:  # a leader that stopped leaves its last view behind
        st.error(
            f"Stale: the scheduler leader last published {age:.0f} s ago; these counts are "
            "from then, not now. Is the scheduler running?"
        )
    st.caption(
        "Cumulative since each worker's engine started, as the scheduler leader saw it "
        f"{age:.0f} s ago."
    )
    st.dataframe(views.preemption_frame(report), hide_index=True, key="preemption_table")


def main() -> None:
    st.title("Reports")
    params = _params()
    try:
        report = session.client().report(**params)
        if not report["nodes"]:
            st.info("No requests in this period.")
            return
        _show(report, params)
        _kinds(params)
        _programs(params)
    except AdminApiError as exc:
        session.show_error(exc)


main()
