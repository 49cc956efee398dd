"""Workflows page when the learned view cannot be read: its own module, so that the request
history is empty (the admin server is per module) and nothing else is on the page."""

from __future__ import annotations

from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from console.admin_client import AdminApiError, AdminClient
from tests.console.conftest import AdminServer, signed_in


def test_a_failing_learned_view_is_an_error_not_nothing_learned(
    admin_server: AdminServer, app_test: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: AdminClient, **_: Any) -> dict[str, Any]:
        raise AdminApiError(500, "the live checkpoint does not decode")

    monkeypatch.setattr(AdminClient, "learned_workflows", broken)
    at = signed_in(app_test, "app_pages/workflows.py")
    assert not at.exception, at.exception
    assert any("does not decode" in e.value for e in at.error), at.error
    assert not any("Nothing learned" in i.value for i in at.info)


def test_no_leader_and_no_history_is_nothing_to_show(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    at = signed_in(app_test, "app_pages/workflows.py")  # no leader: 503 no_live_state
    assert not at.exception, at.exception
    assert not at.error
    assert any("Nothing learned" in i.value for i in at.info)
