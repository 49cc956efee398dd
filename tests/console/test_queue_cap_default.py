"""Policy & knobs' default queue cap while the knob is unset: its own module, with an admin
server whose gateway settings set ARBITER_DEFAULT_QUEUE_CAP (the shared one keeps 256)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from streamlit.testing.v1 import AppTest

from control_plane.api.app import create_app
from control_plane.settings import Settings
from storage.db import Database
from tests.console.conftest import TOKEN, AdminServer, signed_in
from tests.control_plane.api.admin.served import served
from tests.support.redis_server import RedisServer


@pytest.fixture(scope="module")
def admin_server(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AdminServer]:
    redis_server.flush()
    url = f"sqlite:///{tmp_path_factory.mktemp('cap') / 'arbiter.db'}"
    db = Database(url)
    db.migrate()
    settings = Settings(
        redis_url=redis_server.url, database_url=url, admin_token=TOKEN, default_queue_cap=64
    )
    with served(create_app(settings, db=db), ready_path="/healthz") as base:
        yield AdminServer(base, redis_server.url, db)
    db.dispose()


def test_an_unset_default_cap_shows_the_gateway_s_not_256(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """Gateways cap tenants without their own at ARBITER_DEFAULT_QUEUE_CAP while the knob is
    unset; the form showed 256 (the console's constant) as the cap in force."""
    at = signed_in(app_test, "app_pages/policy.py")
    assert not at.exception, at.exception
    assert at.number_input(key="queue_default").value == 64
    assert any("ARBITER_DEFAULT_QUEUE_CAP (64)" in c.value for c in at.caption)
    at.number_input(key="queue_default").set_value(80)
    at.text_input(key="queue_reason").input("more room")
    at.button(key="queue_submit").click().run()
    review = at.table[-1].value
    assert (review["current"].iloc[0], review["new"].iloc[0]) == ("64", "80")
