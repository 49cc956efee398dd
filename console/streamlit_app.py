"""Arbiter's operator console (Streamlit): sign in with the admin token, then Live, Policy &
knobs, Workers, Workflows and Reports pages — all data comes from the admin API over HTTP.

Run: `streamlit run console/streamlit_app.py`. The admin API's URL comes from
`$ARBITER_CONSOLE_API` (default http://127.0.0.1:8080) and only from there: visitors type a
token, never an address.
"""

from __future__ import annotations

import streamlit as st

from console import session

REFRESH_CHOICES = (0.0, 2.0, 3.0, 5.0, 10.0, 30.0)


def sign_in_page() -> None:
    """The token form; the token is checked against the API before it is kept."""
    st.title("Arbiter console")
    st.write("Sign in with the admin token (`ARBITER_ADMIN_TOKEN` of the gateway).")
    st.caption(f"Admin API: {session.api_base()}")
    with st.form("sign_in"):
        token = st.text_input("Admin token", type="password", key="signin_token")
        submitted = st.form_submit_button("Sign in", key="sign_in_submit")
    if not submitted:
        return
    if not token.strip():
        st.error("Enter the admin token.")
        return
    error = session.sign_in(token.strip())
    if error is None:
        st.rerun()
    session.show_error(error)


def sidebar() -> None:
    with st.sidebar:
        st.caption(f"Admin API: {session.api_base()}")
        current = session.refresh_seconds() or 0.0
        index = REFRESH_CHOICES.index(current) if current in REFRESH_CHOICES else 2
        st.selectbox(
            "Refresh live data every",
            REFRESH_CHOICES,
            index=index,
            format_func=lambda s: "off" if s == 0 else f"{s:g} s",
            key="refresh_s",
        )
        if st.button("Sign out", key="sign_out"):
            session.sign_out()
            st.rerun()


def main() -> None:
    st.set_page_config(page_title="Arbiter console", layout="wide")
    if not session.signed_in():
        st.navigation([st.Page(sign_in_page, title="Sign in", default=True)]).run()
        return
    sidebar()
    pages = [
        st.Page("app_pages/live.py", title="Live", default=True),
        st.Page("app_pages/policy.py", title="Policy & knobs"),
        st.Page("app_pages/workers.py", title="Workers"),
        st.Page("app_pages/workflows.py", title="Workflows"),
        st.Page("app_pages/reports.py", title="Reports"),
    ]
    st.navigation(pages).run()


main()
