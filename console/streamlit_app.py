"""Arbiter's operator console (Streamlit): sign in with an operator token (or the admin
token), then Live, Policy & knobs, Workers, Workflows and Reports pages — all data comes from
the admin API over HTTP. A reload or a deep link (e.g. /workflows) keeps the sign-in (see
`console.remembered`); signed out, every page's address shows the sign-in form and, once
signed in, that page.

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
    st.write(
        "Sign in with your operator token (`arbiter admin operators create`) or the admin "
        "token (`ARBITER_ADMIN_TOKEN` of the gateway)."
    )
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


def who_line() -> str:
    """Who is signed in, for the sidebar header."""
    who = session.identity()
    if who.get("bootstrap"):
        return f"Signed in with the shared admin token (audit actor: {who['name']}, role admin)"
    return f"Signed in as **{who['name']}** (role {who['role']})"


def sidebar() -> None:
    with st.sidebar:
        st.markdown(who_line())
        if not session.can_change():
            st.caption("Viewer: forms are read-only.")
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


PAGES = (
    ("app_pages/live.py", "Live", "live"),
    ("app_pages/policy.py", "Policy & knobs", "policy"),
    ("app_pages/workers.py", "Workers", "workers"),
    ("app_pages/workflows.py", "Workflows", "workflows"),
    ("app_pages/reports.py", "Reports", "reports"),
)


def _sign_in_at(title: str, url_path: str, default: bool) -> st.Page:
    # Signed out, every page's address answers with the sign-in form (no "page not found"),
    # and after signing in the same address shows the page itself.
    def signin() -> None:
        sign_in_page()

    return st.Page(signin, title=title, url_path=url_path, default=default)


def main() -> None:
    st.set_page_config(page_title="Arbiter console", layout="wide")
    session.write_cookie()
    if not session.restore():
        pages = [_sign_in_at(t, u, i == 0) for i, (_, t, u) in enumerate(PAGES)]
        st.navigation(pages, position="hidden").run()
        return
    sidebar()
    st.navigation(
        [st.Page(f, title=t, url_path=u, default=i == 0) for i, (f, t, u) in enumerate(PAGES)]
    ).run()


main()
