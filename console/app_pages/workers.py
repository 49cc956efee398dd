"""Workers: health, running, waiting, KV usage and preemptions (refreshing), with a red
error and a marked health for every worker whose last scrape is stale (older than the API's
`stale_after_s`: the scheduler stopped scraping, its last numbers stay behind); drain /
undrain, reviewed (current → new status) and confirmed before it is sent."""

from __future__ import annotations

import streamlit as st

from console import session
from console import worker_views as views
from console.admin_client import AdminApiError
from console.forms import change_button, confirm_panel, errors_of, reason_field, review, show_flash


def _table() -> None:
    try:
        rows = session.client().workers()
    except AdminApiError as exc:
        session.show_error(exc)
        return
    if not rows:
        st.info("No worker is registered.")
        return
    stale = views.stale_workers(rows)
    if stale:
        ages = ", ".join(f"{w} ({age:.0f} s)" for w, age in stale.items())
        st.error(
            f"Stale metrics: {ages}. The scheduler leader scrapes every worker every "
            "`ARBITER_SCRAPE_INTERVAL_S`; these were last scraped longer ago than "
            f"{views.stale_limit(rows):g} s (four intervals, at least 10 s), so their health "
            "and load below are from then, not now: is the scheduler running?"
        )
    st.dataframe(views.workers_frame(rows), hide_index=True, key="workers_table")
    st.plotly_chart(views.load_figure(rows), key="workers_load")


def _drain_form(status: dict[str, str]) -> None:
    errors = errors_of("drain")
    with st.form("drain"):
        worker = st.selectbox(
            "Worker", list(status), key="drain_worker", placeholder="Type to search…"
        )
        reason = reason_field("drain", errors)
        left, right = st.columns(2)
        with left:
            drain = change_button(
                "Review drain (finish in-flight, take no new requests)", key="drain_submit"
            )
        with right:
            undrain = change_button("Review undrain (take requests again)", key="undrain_submit")
    if (drain or undrain) and worker:
        api = session.client()
        verb = "draining" if drain else "active again"
        review(
            "drain",
            f"{'drain' if drain else 'undrain'} {worker}",
            {"status": status[worker]},
            {"status": "draining" if drain else "active"},
            reason,
            action=lambda: api.set_draining(worker, drain, reason),
            success=f"{worker} is {verb}.",
        )
    confirm_panel("drain")


def main() -> None:
    st.title("Workers")
    show_flash()
    st.fragment(run_every=session.refresh_seconds())(_table)()
    try:
        status = {w["id"]: str(w.get("status") or "?") for w in session.client().workers()}
    except AdminApiError as exc:
        session.show_error(exc)
        return
    if status:
        st.subheader("Drain or undrain")
        _drain_form(status)


main()
