"""Per-browser-session state of the console: API address, sign-in, refresh, live history.

The admin token lives only in `st.session_state` (server side, per session): it is never put
in a URL, a query parameter or a cookie.
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
API_KEY = "api_base"


def api_base() -> str:
    """The admin API's base URL: chosen at sign-in, else `$ARBITER_CONSOLE_API`."""
    default = os.environ.get(API_ENV, DEFAULT_API)
    return str(st.session_state.get(API_KEY) or default)


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


def sign_in(base: str, token: str) -> AdminApiError | None:
    """Check the token against the API; keep it in the session when it works."""
    trial = AdminClient(base, token)
    try:
        trial.knobs()
    except AdminApiError as exc:
        return exc
    st.session_state[API_KEY] = base.rstrip("/")
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
