"""The real gateway app over real Redis and a migrated SQLite file, for the auth and metrics
tests: `gateway(...)` runs its lifespan and yields it with a tenant `acme` and its API key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from control_plane.api.app import create_app
from control_plane.settings import Settings
from storage.db import Database


@dataclass
class Gateway:
    app: FastAPI
    db: Database
    key: str
    """A valid API key of tenant `acme`."""

    def client(self, ip: str = "127.0.0.1", **kwargs: Any) -> httpx.AsyncClient:
        """An HTTP client to the app whose requests come from `ip`."""
        transport = httpx.ASGITransport(app=self.app, client=(ip, 40000))
        return httpx.AsyncClient(transport=transport, base_url="http://arbiter.test", **kwargs)


@asynccontextmanager
async def gateway(redis_url: str, tmp_path: Path, **settings: Any) -> AsyncIterator[Gateway]:
    url = f"sqlite:///{tmp_path / 'arbiter.db'}"
    db = Database(url)
    db.migrate()
    with db.repos() as r:
        r.tenants.create_tenant(name="acme")
        _, key = r.keys.create(tenant="acme")
    app = create_app(Settings(redis_url=redis_url, database_url=url, **settings), db=db)
    try:
        async with app.router.lifespan_context(app):
            yield Gateway(app, db, key)
    finally:
        db.dispose()
