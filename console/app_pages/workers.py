"""Workers: health, running, waiting, KV usage and preemptions (refreshing); drain / undrain."""

from __future__ import annotations

import streamlit as st

from console import session
from console import worker_views as views
from console.admin_client import AdminApiError
from console.forms import errors_of, reason_field, show_flash, submit


def _table() -> None:
    try:
        rows = session.client().workers()
    except AdminApiError as exc:
        session.show_error(exc)
        return
    if not rows:
        st.info("No worker is registered.")
        return
    st.dataframe(views.workers_frame(rows), hide_index=True, key="workers_table")
    st.plotly_chart(views.load_figure(rows), key="workers_load")


def _drain_form(ids: list[str]) -> None:
    errors = errors_of("drain")
    with st.form("drain"):
        worker = st.selectbox("Worker", ids, key="drain_worker")
        reason = reason_field("drain", errors)
        left, right = st.columns(2)
        drain = left.form_submit_button(
            "Drain (finish in-flight, take no new requests)", key="drain_submit"
        )
        undrain = right.form_submit_button("Undrain (take requests again)", key="undrain_submit")
    if (drain or undrain) and worker:
        api = session.client()
        verb = "draining" if drain else "active again"
        submit("drain", lambda: api.set_draining(worker, drain, reason), f"{worker} is {verb}.")


def main() -> None:
    st.title("Workers")
    show_flash()
    st.fragment(run_every=session.refresh_seconds())(_table)()
    try:
        ids = [w["id"] for w in session.client().workers()]
    except AdminApiError as exc:
        session.show_error(exc)
        return
    if ids:
        st.subheader("Drain or undrain")
        _drain_form(ids)


main()
