"""The console's session settings: a refresh period that is no number of seconds is said on
the page and the default taken (it raised a ValueError traceback on every page)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from console.session import REFRESH_ENV
from tests.console.conftest import TOKEN, AdminServer


@pytest.mark.parametrize("raw", ["soon", "nan", "-1", "inf"])
def test_a_refresh_period_that_is_no_number_is_said_not_raised(
    admin_server: AdminServer, app_test: AppTest, monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(REFRESH_ENV, raw)
    app_test.run()
    app_test.text_input(key="signin_token").input(TOKEN)
    app_test.button[0].click()
    app_test.run()  # the first signed-in page reads the setting (then the sidebar's choice)
    assert not app_test.exception, app_test.exception
    assert any(
        f"{REFRESH_ENV}={raw!r} is not a number of seconds" in w.value for w in app_test.warning
    ), [w.value for w in app_test.warning]
    assert app_test.selectbox(key="refresh_s").value == 3.0
    at = app_test.switch_page("app_pages/workers.py").run()
    assert not at.exception, at.exception
