"""Workflows: per application, what the scheduler leader learned online and schedules by
(agent graph, live priority order, latency windows, convergence; refreshed with the live
data), and, in a second tab, the same graph and distributions rebuilt from the request
history of the last 24 h."""

from __future__ import annotations

import time
from typing import Any

import streamlit as st

from console import learned_views as learned
from console import session
from console import workflow_views as views
from console.admin_client import AdminApiError
from console.live_views import PUBLISH_PERIOD_S, STALE_AFTER_S

NO_LEADER = (
    "No scheduler leader has published its live state yet (is the scheduler up?): nothing "
    "learned to show."
)
NO_LIVE_STATE = "no_live_state"
TAGS_HINT = (
    "Agents appear here when requests carry X-Arbiter-App, X-Arbiter-Agent, "
    "X-Arbiter-Workflow and X-Arbiter-Upstream (the upstream agent's name)."
)


def _learned_payload() -> tuple[dict[str, Any] | None, AdminApiError | None]:
    try:
        return session.client().learned_workflows(), None
    except AdminApiError as exc:
        return None, exc


def _show_learned_app(app: dict[str, Any], policy: str, updated_at: float) -> None:
    now = time.time()
    age = now - updated_at
    if age > STALE_AFTER_S:  # a leader that stopped leaves its last view behind
        st.error(
            f"Stale: the scheduler leader last published {age:.0f} s ago (it publishes every "
            f"{PUBLISH_PERIOD_S:g} s). The graph, priority order and windows below are what it "
            "had learned then, not what any scheduler uses now: is the scheduler running?"
        )
    st.caption(
        f"Policy the leader runs: **{policy}** · updated {learned.ago(updated_at, now)} · "
        f"{app['workflows']} workflows learned. Edge labels: calls over the source agent's "
        "calls (a router that always asks both experts reads 100 % on each edge)."
    )
    st.plotly_chart(learned.learned_figure(app), key="wf_learned_graph")
    st.dataframe(learned.edges_frame(app), hide_index=True, key="wf_learned_edges")
    st.subheader("Priority order the scheduler uses")
    st.markdown(learned.policy_note(policy, app.get("scored_at"), now))
    st.dataframe(learned.priority_frame(app), hide_index=True, key="wf_priority")
    ties = learned.ties_note(app)
    if ties is not None:
        st.caption(ties)
    st.markdown(learned.badges(app))
    left, right = st.columns(2)
    left.plotly_chart(learned.latency_figure(app, "single"), key="wf_learned_single")
    right.plotly_chart(learned.latency_figure(app, "remaining"), key="wf_learned_remaining")
    st.caption(
        "The scheduler's windows (its latest calls per agent): boxes p25–median–p75, "
        "whiskers p10–p90. Converged: the window moved less than 5 % of its mean since the "
        "last check (Wasserstein distance, the `distance` column)."
    )


def _no_leader(error: AdminApiError | None) -> bool:
    """The learned view's 503 `no_live_state`: nothing learned, not a failure."""
    return error is not None and error.code == NO_LIVE_STATE


def _learned_panel(tenant: str, app_name: str) -> None:
    payload, error = _learned_payload()
    if error is not None:
        if _no_leader(error):
            st.info(NO_LEADER)
        else:
            session.show_error(error)
        return
    assert payload is not None
    apps = [a for a in payload["data"] if (a["tenant"], a["app"]) == (tenant, app_name)]
    if not apps:
        st.info(
            f"The scheduler has learned nothing about {tenant}/{app_name} yet: a workflow is "
            "learned once none of its calls is queued or running and none has ended for 10 s."
        )
        return
    _show_learned_app(apps[0], str(payload["policy"]), float(payload["updated_at"]))


def _history_panel(known: dict[str, Any] | None, tenant: str, app_name: str) -> None:
    if known is None:
        st.info(f"No requests of {tenant}/{app_name} in the last 24 h.")
        return
    limit = views.HISTORY_ROWS
    try:
        graph = session.client().workflow(app_name, tenant, limit=limit)
    except AdminApiError as exc:
        session.show_error(exc)
        return
    caption, truncated = views.rows_note(int(graph["calls"]), "This graph", limit)
    if truncated:
        st.warning(truncated)
    st.caption(caption)
    cols = st.columns(3)
    cols[0].metric("Calls", graph["calls"])
    cols[1].metric("Workflows", graph["workflows"])
    cols[2].metric("Agents", len(graph["agents"]))
    st.plotly_chart(views.history_figure(graph), key="wf_graph")
    st.dataframe(views.edges_frame(graph), hide_index=True, key="wf_edges")
    single, remaining = st.tabs(["Single-call latency", "Remaining latency"])
    single.plotly_chart(views.latency_figure(graph, "single"), key="wf_single")
    remaining.plotly_chart(views.latency_figure(graph, "remaining"), key="wf_remaining")
    st.dataframe(views.agents_frame(graph), hide_index=True, key="wf_agents")


def main() -> None:
    st.title("Workflows")
    api = session.client()
    limit = views.HISTORY_ROWS
    try:
        answer = api.workflows(limit=limit)
    except AdminApiError as exc:
        session.show_error(exc)
        return
    history = list(answer["data"])
    payload, error = _learned_payload()
    _, truncated = views.rows_note(int(answer.get("rows") or 0), "The application list", limit)
    if truncated:
        st.warning(truncated)
    labels = learned.app_labels(payload["data"] if payload else [], history)
    if not labels:
        failed = error is not None and not _no_leader(error)
        if error is not None and failed:  # the learned view is unknown, not empty
            session.show_error(error)
        what = "No requests" if failed else "Nothing learned by the scheduler and no requests"
        st.info(f"{what} in the last 24 h. {TAGS_HINT}")
        return
    label = st.selectbox("Application", labels, key="wf_app")
    tenant, app_name = label.split("/", 1)
    known = next((a for a in history if learned.app_label(a["tenant"], a["app"]) == label), None)
    live, past = st.tabs(["Learned by the scheduler", "From history"])
    with live:
        st.fragment(run_every=session.refresh_seconds())(_learned_panel)(tenant, app_name)
    with past:
        _history_panel(known, tenant, app_name)


main()
