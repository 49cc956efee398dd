"""Per-browser-session state of the console: sign-in (who, with which role), refresh.

The admin or operator token lives only on the server: in `st.session_state` and, so that a
reload or a deep link keeps the operator signed in, in this process's `remembered.SIGN_INS`
under a random id that the browser keeps in a cookie. The token is never put in a URL, a
query parameter or a cookie. The admin API's address is the server's configuration
(`$ARBITER_CONSOLE_API`), never a visitor's input, so nobody can make the console server send
requests (with the token they type) to an address of their choosing.
"""

from __future__ import annotations

import math
import os
from typing import Any

import streamlit as st

from console.admin_client import AdminApiError, AdminClient
from console.remembered import COOKIE, SIGN_INS, cookie_script

API_ENV = "ARBITER_CONSOLE_API"
REFRESH_ENV = "ARBITER_CONSOLE_REFRESH_S"
DEFAULT_API = "http://127.0.0.1:8080"
TOKEN_KEY = "admin_token"
WHO_KEY = "operator"
SID_KEY = "console_sid"
COOKIE_PENDING = "cookie_pending"


def api_base() -> str:
    """The admin API's base URL: `$ARBITER_CONSOLE_API` (set by `arbiter up`), fixed per server."""
    return os.environ.get(API_ENV, DEFAULT_API).rstrip("/")


DEFAULT_REFRESH_S = 3.0


def refresh_seconds() -> float | None:
    """Seconds between live refreshes (sidebar choice; `$ARBITER_CONSOLE_REFRESH_S`; 0 = off)."""
    chosen = st.session_state.get("refresh_s")
    value = float(chosen) if chosen is not None else _refresh_setting()
    return value if value > 0 else None


def _refresh_setting() -> float:
    """`$ARBITER_CONSOLE_REFRESH_S`; a value that is no number of seconds is said (one line on
    the page) and the default taken, rather than a traceback on every page."""
    raw = os.environ.get(REFRESH_ENV, "").strip()
    if not raw:
        return DEFAULT_REFRESH_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value >= 0:
        return value
    st.warning(
        f"{REFRESH_ENV}={raw!r} is not a number of seconds (0 = off): "
        f"refreshing every {DEFAULT_REFRESH_S:g} s"
    )
    return DEFAULT_REFRESH_S


def signed_in() -> bool:
    return bool(st.session_state.get(TOKEN_KEY))


def client() -> AdminClient:
    """The admin client of this session (call only when signed in)."""
    return AdminClient(api_base(), str(st.session_state.get(TOKEN_KEY, "")))


def identity() -> dict[str, Any]:
    """Who is signed in: `name`, `role` (viewer | operator | admin) and `bootstrap`."""
    return dict(st.session_state.get(WHO_KEY) or {"name": "?", "role": "viewer"})


def can_change() -> bool:
    """Whether the signed-in role may submit changes (viewers only read)."""
    return identity().get("role") in ("operator", "admin")


def sign_in(token: str) -> AdminApiError | None:
    """Check the token against the configured API; keep it (and who it is) when it works,
    and remember it under a fresh session id for the browser's cookie."""
    try:
        who = AdminClient(api_base(), token).whoami()
    except AdminApiError as exc:
        return exc
    _keep(token, who)
    SIGN_INS.forget(st.session_state.get(SID_KEY) or _cookie())  # a sign-in replaces the last
    sid = SIGN_INS.remember(token, who)
    st.session_state[SID_KEY] = sid
    st.session_state[COOKIE_PENDING] = sid
    return None


def restore() -> bool:
    """Sign this browser session in again from its cookie (after a reload or a deep link)."""
    if signed_in():
        return True
    sid = _cookie()
    found = SIGN_INS.recall(sid)
    if found is None:
        return False
    _keep(found.token, found.identity)
    st.session_state[SID_KEY] = sid
    return True


def write_cookie() -> None:
    """Set (after sign-in) or expire (after sign-out) the session cookie in the browser."""
    if COOKIE_PENDING not in st.session_state:
        return
    sid = st.session_state.pop(COOKIE_PENDING)
    st.html(cookie_script(sid, secure=_https()), unsafe_allow_javascript=True)


def sign_out() -> None:
    SIGN_INS.forget(st.session_state.get(SID_KEY) or _cookie())
    for key in (TOKEN_KEY, WHO_KEY, SID_KEY):
        st.session_state.pop(key, None)
    st.session_state[COOKIE_PENDING] = None


def _keep(token: str, who: dict[str, Any]) -> None:
    st.session_state[TOKEN_KEY] = token
    st.session_state[WHO_KEY] = dict(who)


def _cookie() -> str | None:
    try:
        return st.context.cookies.get(COOKIE)
    except (AttributeError, RuntimeError):  # no browser (e.g. AppTest)
        return None


def _https() -> bool:
    try:
        return str(st.context.url or "").startswith("https:")
    except (AttributeError, RuntimeError):
        return False


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
