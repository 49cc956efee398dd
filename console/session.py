"""Per-browser-session state of the console: sign-in, refresh, live history.

The admin token lives only in `st.session_state` (server side, per session): it is never put
in a URL, a query parameter or a cookie. The admin API's address is the server's configuration
(`$ARBITER_CONSOLE_API`), never a visitor's input, so nobody can make the console server send
requests (with the token they type) to an address of their choosing.
"""

from __future__ import annotations

import os
from typing import Any

import streamlit as st

from console.admin_client import AdminApiError, AdminClient

API_ENV = "ARBITER_CONSOLE_API"
REFRESH_ENV = "ARBITER_CONSOLE_REFRESH_S"
DEFAULT_API = "http://127.0.0.1:8080"
TOKEN_KEY = "admin_token"


def api_base() -> str:
    """The admin API's base URL: `$ARBITER_CONSOLE_API` (set by `arbiter up`), fixed per server."""
    return os.environ.get(API_ENV, DEFAULT_API).rstrip("/")


def refresh_seconds() -> float | None:
    """Seconds between live refreshes (sidebar choice; `$ARBITER_CONSOLE_REFRESH_S`; 0 = off)."""
    chosen = st.session_state.get("refresh_s")
    value = float(chosen if chosen is not None else os.environ.get(REFRESH_ENV, "3"))
    return value if value > 0 else None


def signed_in() -> bool:
    return bool(st.session_state.get(TOKEN_KEY))


def client() -> AdminClient:
    """The admin client of this session (call only when signed in)."""
    return AdminClient(api_base(), str(st.session_state.get(TOKEN_KEY, "")))


def sign_in(token: str) -> AdminApiError | None:
    """Check the token against the configured API; keep it in the session when it works."""
    trial = AdminClient(api_base(), token)
    try:
        trial.knobs()
    except AdminApiError as exc:
        return exc
    st.session_state[TOKEN_KEY] = token
    return None


def sign_out() -> None:
    for key in (TOKEN_KEY, "live_history"):
        st.session_state.pop(key, None)


def show_error(exc: AdminApiError) -> None:
    """An API error, plainly: what the API said (and which field)."""
    if exc.status == 401:
        # on the sign-in form there is no session to leave yet
        hint = " Sign out and sign in again." if TOKEN_KEY in st.session_state else ""
        st.error(f"The admin API refused the token: {exc.message}{hint}")
    elif exc.status == 0:
        st.error(str(exc))
    else:
        st.error(f"The admin API answered {exc}")


def field_error(errors: dict[str, str], *params: str) -> None:
    """Show the API's message for a form field right under it."""
    for param in params:
        if param in errors:
            st.caption(f":red[{errors[param]}]")


def remember(key: str, value: Any) -> None:
    st.session_state[key] = value
