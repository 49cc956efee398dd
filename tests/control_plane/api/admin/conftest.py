"""The real gateway app (admin API included) in-process over real Redis and a migrated
database, driven through `httpx.ASGITransport` with the lifespan running."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from control_plane.api.app import create_app
from control_plane.settings import Settings
from control_plane.state import StateStores
from storage.db import Database

TOKEN = "t"


@dataclass
class AdminApi:
    app: FastAPI
    client: httpx.AsyncClient
    db: Database

    @property
    def stores(self) -> StateStores:
        stores: StateStores = self.app.state.stores
        return stores


async def _serve(redis_url: str, database_url: str) -> AsyncIterator[AdminApi]:
    db = Database(database_url)
    db.migrate()
    settings = Settings(redis_url=redis_url, database_url=database_url, admin_token=TOKEN)
    app = create_app(settings, db=db)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport,
                base_url="http://arbiter.test",
                headers={"Authorization": f"Bearer {TOKEN}", "X-Arbiter-Actor": "ops@test"},
            ) as client:
                yield AdminApi(app, client, db)
    finally:
        db.dispose()


@pytest.fixture
async def api(redis_url: str, tmp_path: Path) -> AsyncIterator[AdminApi]:
    """The admin API over SQLite."""
    async for served in _serve(redis_url, f"sqlite:///{tmp_path / 'arbiter.db'}"):
        yield served


@pytest.fixture
async def api_any_db(redis_url: str, db_url: str) -> AsyncIterator[AdminApi]:
    """The admin API over SQLite and over PostgreSQL (through `db_url`)."""
    async for served in _serve(redis_url, db_url):
        yield served
