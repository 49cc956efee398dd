"""`create_app(settings)`: the gateway's FastAPI app (tenant API, admin API, health, metrics).

Nothing is created at import time; the lifespan opens Redis, SQL and the HTTP client, starts
the grant reader, the event reporter and the heartbeat, and closes everything on shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI

from control_plane.api import health, openai_routes
from control_plane.api.body_limit import BodyLimit
from control_plane.api.hot_path import GatewayApp
from control_plane.api.openapi import install_openapi
from control_plane.gateway.auth_limit import FailedAuthLimiter
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.directory import RedisDoorLimits, RedisModelCatalog, SqlDirectory
from control_plane.gateway.errors import install_error_handlers
from control_plane.gateway.grants import GrantWaiter
from control_plane.gateway.heartbeat import Liveness, beat_once, leave, run_heartbeat
from control_plane.gateway.knobs import follow_knobs
from control_plane.gateway.leader_watch import LeaderWatch
from control_plane.gateway.metrics import GatewayMetrics, tenant_labels
from control_plane.gateway.proxy import upstream_session
from control_plane.gateway.reporter import EventReporter
from control_plane.gateway.service import Gateway
from control_plane.gc_freeze import freeze_startup_heap
from control_plane.settings import Settings
from control_plane.state import StateStores, StateUnavailable, sentinel_of
from control_plane.state.tasks import stop_tasks
from storage.db import Database


@dataclass
class UsageReader:
    """`GET /v1/usage`: the tenant's totals from SQL history."""

    db: Database

    async def for_tenant(self, tenant: str, *, since: float) -> dict[str, Any]:
        usage = await asyncio.to_thread(self._read, tenant, since)
        return {
            "requests": usage.requests,
            "prompt_tokens": usage.n_in,
            "completion_tokens": usage.n_out,
            "total_tokens": usage.n_in + usage.n_out,
            "unified_service": usage.unified_service,
            "images": usage.images,
        }

    def _read(self, tenant: str, since: float) -> Any:
        with self.db.reader() as r:
            return r.requests.usage_for_tenant(tenant=tenant, since=since)


def create_app(
    settings: Settings, *, db: Database | None = None, freeze_heap: bool = False
) -> FastAPI:
    """The gateway application for `settings` (one replica); `freeze_heap` (the gateway
    process) freezes the start-up heap once the lifespan has built everything
    (`control_plane.gc_freeze`) — not for an app hosted in another process, such as a test."""
    gateway_id = settings.gateway_id or f"gw-{uuid.uuid4().hex[:8]}"

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        database = db or Database(settings.database_url)
        stores = StateStores.open(
            settings.redis_url,
            settings.cluster,
            client_name=f"arbiter-{gateway_id}",
            sentinel=sentinel_of(settings),
            multiplex=settings.redis_multiplex,
        )
        http = upstream_session(
            settings.upstream_connect_timeout_s, settings.upstream_idle_timeout_s
        )
        directory = SqlDirectory(
            database, strict=settings.strict_hierarchy, max_entries=settings.directory_cache_entries
        )
        metrics = GatewayMetrics(tenant_labels(settings))
        reporter = EventReporter(
            stores.completions, settings.progress_interval_s, on_dropped=metrics.dropped
        )
        deps = GatewayDeps(
            settings=settings,
            gateway_id=gateway_id,
            requests=stores.requests,
            directory=directory,
            catalog=RedisModelCatalog(stores, database),
            limits=RedisDoorLimits(stores, on_refused=metrics.refused),
            waiter=None,
            reporter=reporter,
            http=http,
            metrics=metrics,
        )
        gateway = Gateway(deps)
        watch = LeaderWatch(
            stores.lease, settings.no_leader_bound_s(), interval_s=settings.leader_probe_interval_s
        )
        deps.waiter = GrantWaiter(stores.grants, gateway_id, gateway.release_orphan, watch)
        with contextlib.suppress(StateUnavailable):
            await stores.preload_scripts()
            deps.waiter.start_after(await stores.grants.latest_id(gateway_id))
        app.state.settings, app.state.gateway_id = settings, gateway_id
        app.state.stores, app.state.db, app.state.gateway = stores, database, gateway
        app.state.keys, app.state.directory = directory, directory
        app.state.auth_limiter = FailedAuthLimiter.for_settings(settings)
        app.state.auth_charging = set()  # key digests whose first lookup is charged, in flight
        app.state.metrics, app.state.usage = deps.metrics, UsageReader(database)
        app.state.started_at = time.time()
        beat_s, dead_after_s = settings.gateway_heartbeat_s, settings.gateway_dead_after_s
        # registered before the first request, so none is ever owned by an unknown replica
        deps.liveness = Liveness(dead_after_s)
        await beat_once(stores.gateways, gateway_id, dead_after_s, deps.liveness)
        tasks = [
            asyncio.create_task(deps.waiter.run()),
            asyncio.create_task(reporter.run()),
            asyncio.create_task(follow_knobs(stores, deps.knobs, directory)),
            asyncio.create_task(
                run_heartbeat(stores.gateways, gateway_id, beat_s, dead_after_s, deps.liveness)
            ),
        ]
        if freeze_heap:  # what the replica keeps for life, out of the collector's way
            freeze_startup_heap()
        try:
            yield
        finally:
            # bounded: a reader stuck in a blocking Redis call must not hang shutdown
            await stop_tasks(tasks, within_s=5.0)
            # after the reporter's last flush: what this replica finished is recorded as such
            await leave(stores.gateways, gateway_id)
            await http.close()
            await stores.aclose()
            if db is None:
                database.dispose()

    app = GatewayApp(title="Arbiter gateway", version="0.1.0", lifespan=lifespan)
    app.max_body_bytes = settings.max_body_bytes
    install_error_handlers(app)
    install_openapi(app)
    app.include_router(openai_routes.router)
    app.include_router(health.router)
    _include_admin(app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app


def _include_admin(app: FastAPI) -> None:
    from control_plane.api.admin import router as admin_router

    app.include_router(admin_router)
