"""A real admin API (the gateway app) served by uvicorn on a free port, in a thread, over the
session's redis-server and a SQLite file; console tests point Streamlit's AppTest at it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from streamlit.testing.v1 import AppTest

import console
from control_plane.api.app import create_app
from control_plane.contracts.workers import decode_sample
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.scheduler.views import live_view
from control_plane.settings import Settings
from control_plane.state import HistoryPoint, StateStores
from storage.db import Database
from tests.control_plane.api.admin.live_state import publish_live_state
from tests.control_plane.api.admin.served import served
from tests.support.redis_server import RedisServer

TOKEN = "console-test-token"
APP = str(Path(console.__file__).parent / "streamlit_app.py")


@dataclass
class AdminServer:
    url: str
    redis_url: str
    db: Database

    def http(self) -> httpx.Client:
        """A client for setting up data through the same API."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )

    def publish_live_state(self, now: float) -> None:
        """Live state as a scheduler leader writes it (see the admin tests' `live_state`)."""

        async def publish() -> None:
            stores = StateStores.open(self.redis_url, "default")
            try:
                await publish_live_state(stores, now)
            finally:
                await stores.aclose()

        asyncio.run(publish())

    def publish_history(self, samples: list[tuple[float, float]]) -> None:
        """Rolling-history samples as the leader appends them: (time, alpha's service)."""

        async def publish() -> None:
            stores = StateStores.open(self.redis_url, "default")
            try:
                for t, service in samples:
                    points = [
                        HistoryPoint("alpha", service=service, service_rate=1.0, demand_rate=2.0),
                        HistoryPoint("beta", service=service / 2),
                    ]
                    await stores.live_history.append(points, t)
            finally:
                await stores.aclose()

        asyncio.run(publish())

    def set_worker_metrics(self, worker_id: str, metrics: dict[str, Any], now: float) -> None:
        """What the scheduler's scrape loop stores for a worker."""

        async def store() -> None:
            stores = StateStores.open(self.redis_url, "default")
            try:
                await stores.workers.set_metrics(worker_id, decode_sample(metrics), now)
            finally:
                await stores.aclose()

        asyncio.run(store())


@pytest.fixture(scope="module")
def admin_server(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AdminServer]:
    redis_server.flush()
    url = f"sqlite:///{tmp_path_factory.mktemp('console') / 'arbiter.db'}"
    db = Database(url)
    db.migrate()
    settings = Settings(redis_url=redis_server.url, database_url=url, admin_token=TOKEN)
    with served(create_app(settings, db=db), ready_path="/healthz") as base:
        yield AdminServer(base, redis_server.url, db)
    db.dispose()


@pytest.fixture
def app_test(admin_server: AdminServer, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The console, not signed in yet, pointed at the admin server."""
    monkeypatch.setenv("ARBITER_CONSOLE_API", admin_server.url)
    return AppTest.from_file(APP, default_timeout=30)


def signed_in(at: AppTest, page: str) -> AppTest:
    """Sign in through the form, then open `page` (e.g. 'app_pages/live.py')."""
    at.run()
    at.text_input(key="signin_token").input(TOKEN)
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    return at.switch_page(page).run()


def publish_core(admin_server: AdminServer, core: SchedulerCore, at: float | None = None) -> None:
    """Publish `core`'s live view as a scheduler leader would (`leader-test`, at `at`: now
    when None; earlier for a leader that stopped)."""

    async def save() -> None:
        stores = StateStores.open(admin_server.redis_url, "default")
        try:
            when = time.time() if at is None else at
            await stores.checkpoints.save_live(live_view(core, "leader-test", when))
        finally:
            await stores.aclose()

    asyncio.run(save())
