"""Sign-in: a wrong token is refused plainly; the right one opens the console; the token stays
in the server-side session, never in the URL."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.console.conftest import TOKEN


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
