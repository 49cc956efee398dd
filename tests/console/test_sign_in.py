"""Sign-in: a wrong token is refused plainly; the right one opens the console; the token stays
in the server-side session, never in the URL; the admin API's address is the server's
configuration, which a visitor can neither see as a field nor change."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from console import session
from tests.console.conftest import APP, TOKEN, AdminServer


def test_sign_in_flow(app_test: AppTest) -> None:
    at = app_test
    at.run()
    assert not at.exception
    assert at.title[0].value == "Arbiter console"
    at.text_input(key="signin_token").input("wrong-token")
    at.button[0].click()
    at.run()
    assert "refused the token" in at.error[0].value
    assert "admin_token" not in at.session_state

    at.text_input(key="signin_token").input(TOKEN)
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["admin_token"] == TOKEN
    assert at.title[0].value == "Live"
    assert TOKEN not in str(dict(at.query_params))

    at.sidebar.button(key="sign_out").click()
    at.run()
    assert "admin_token" not in at.session_state
    assert at.title[0].value == "Arbiter console"


def test_admin_api_address_is_fixed_by_configuration(
    app_test: AppTest, admin_server: AdminServer
) -> None:
    at = app_test
    at.run()
    assert [t.key for t in at.text_input] == ["signin_token"]  # a token, never an address
    assert f"Admin API: {admin_server.url}" in [c.value for c in at.caption]
    at.session_state["api_base"] = "http://127.0.0.1:9/elsewhere"  # what a form once set
    at.text_input(key="signin_token").input(TOKEN)
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Live"
    assert f"Admin API: {admin_server.url}" in [c.value for c in at.sidebar.caption]


def test_a_new_browser_session_with_the_cookie_is_still_signed_in(
    app_test: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload is a new Streamlit session: it finds the sign-in through the cookie's id."""
    at = app_test
    at.run()
    at.text_input(key="signin_token").input(TOKEN)
    at.button[0].click()
    at.run()
    sid = at.session_state["console_sid"]
    assert TOKEN not in sid and any("Max-Age" in h.proto.body for h in at.get("html"))
    reloaded = AppTest.from_file(APP, default_timeout=30)
    monkeypatch.setattr(session, "_cookie", lambda: sid)  # what the browser sends back
    reloaded.run()
    assert not reloaded.exception, reloaded.exception
    assert reloaded.title[0].value == "Live"
    assert "shared admin token" in reloaded.sidebar.markdown[0].value
    reloaded.sidebar.button(key="sign_out").click()
    reloaded.run()
    assert reloaded.title[0].value == "Arbiter console"
    fresh = AppTest.from_file(APP, default_timeout=30)
    fresh.run()  # the id was forgotten at sign-out: the cookie no longer signs in
    assert fresh.title[0].value == "Arbiter console"
