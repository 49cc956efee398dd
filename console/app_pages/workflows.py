"""Workflows: per application, the agent graph (edge frequencies, parallel calls) and each
agent's single-call and remaining-latency distributions, from the request history."""

from __future__ import annotations

import streamlit as st

from console import session
from console import workflow_views as views
from console.admin_client import AdminApiError


def main() -> None:
    st.title("Workflows")
    api = session.client()
    try:
        apps = api.workflows()
    except AdminApiError as exc:
        session.show_error(exc)
        return
    if not apps:
        st.info(
            "No requests in the last 24 h. Agents appear here when requests carry "
            "X-Arbiter-App, X-Arbiter-Agent, X-Arbiter-Workflow and X-Arbiter-Upstream."
        )
        return
    labels = {f"{a['tenant']}/{a['app']}": a for a in apps}
    label = st.selectbox("Application", list(labels), key="wf_app")
    chosen = labels[label]
    try:
        graph = api.workflow(chosen["app"], chosen["tenant"])
    except AdminApiError as exc:
        session.show_error(exc)
        return
    cols = st.columns(3)
    cols[0].metric("Calls", graph["calls"])
    cols[1].metric("Workflows", graph["workflows"])
    cols[2].metric("Agents", len(graph["agents"]))
    st.plotly_chart(views.graph_figure(graph), key="wf_graph")
    st.dataframe(views.edges_frame(graph), hide_index=True, key="wf_edges")
    single, remaining = st.tabs(["Single-call latency", "Remaining latency"])
    single.plotly_chart(views.latency_figure(graph, "single"), key="wf_single")
    remaining.plotly_chart(views.latency_figure(graph, "remaining"), key="wf_remaining")
    st.dataframe(views.agents_frame(graph), hide_index=True, key="wf_agents")


main()
