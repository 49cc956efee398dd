"""SQL-backed lookups for the gateway, cached briefly so the hot path rarely touches SQL.

Keys resolve through a 2-second cache (a revocation on this gateway clears it at once; other
gateways see it within the TTL or on the `directory` knob). Every cache is bounded in size and
time (`control_plane.gateway.cache`), so unauthenticated callers cannot grow memory. Applications
and agents named in headers are created on first use with default weights, unless strict mode
is on.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable

from control_plane.core.unified import ModelShape, unit_factor
from control_plane.gateway.cache import SingleFlight, TtlCache
from control_plane.gateway.deps import ModelEntry
from control_plane.gateway.errors import ApiError
from control_plane.gateway.identity import NodeInfo, SloDefaults, TenantInfo
from control_plane.state import StateStores
from control_plane.state.budget import seconds_to_next_day
from storage.db import Database
from storage.records import AgentRecord, AppRecord, ModelRecord, TenantRecord
from storage.repos.keys import MIN_KEY_LEN
from workers.engine.diffusion import GenerationRule
from workers.engine.vision import ImageTokenRule

log = logging.getLogger(__name__)


def tenant_info(rec: TenantRecord) -> TenantInfo:
    return TenantInfo(
        name=rec.name,
        tier=rec.priority_tier,
        weight=rec.weight,
        queue_cap=rec.queue_cap,
        rate_limit_rps=rec.rate_limit_rps,
        token_budget=rec.token_budget,
        slo=SloDefaults(rec.slo_ttft_ms, rec.slo_tpot_ms, rec.slo_e2e_ms),
    )


def key_digest(api_key: str) -> bytes:
    """What the caches hold instead of a key: 32 bytes, whatever the key's length."""
    return hashlib.sha256(api_key.encode()).digest()


class SqlDirectory:
    """Tenants, keys and hierarchy from SQL, behind bounded caches (memory never grows with
    what requests name: every cache below holds at most `max_entries` entries).

    - Valid keys → tenant: fresh for `ttl_s`. Unknown or revoked keys: fresh for
      `negative_ttl_s`, so repeating a bad key costs no SQL. Both are keyed by the key's
      SHA-256 digest and single-flight per key; keys shorter than any issued key never reach SQL.
    - `vouched(key)`: the key resolved valid on this gateway within `trust_s`. It only spares a
      key the failed-auth limiter; access is still decided by the caches and SQL above, so a
      revocation takes effect exactly as fast as before.
    - Tenants (`ttl_s`), and tenant/app/agent nodes (`5 × ttl_s`).

    `invalidate()` (after any directory change) drops everything but the trust memo.
    """

    def __init__(
        self,
        db: Database,
        *,
        strict: bool = False,
        ttl_s: float = 2.0,
        negative_ttl_s: float = 10.0,
        trust_s: float = 3600.0,
        max_entries: int = 10_000,
    ) -> None:
        self.db = db
        self.strict = strict
        self.sql_key_lookups = 0
        self._keys: TtlCache[bytes, str] = TtlCache(ttl_s, max_entries)
        self._bad_keys: TtlCache[bytes, bool] = TtlCache(negative_ttl_s, max_entries)
        self._trusted: TtlCache[bytes, bool] = TtlCache(trust_s, max_entries)
        self._key_flight: SingleFlight[bytes, str | None] = SingleFlight()
        self._tenants: TtlCache[str, TenantInfo] = TtlCache(ttl_s, max_entries)
        self._nodes: TtlCache[tuple[str, str, str], NodeInfo] = TtlCache(ttl_s * 5, max_entries)
        self._records: TtlCache[tuple[str, str, str], tuple[AppRecord, AgentRecord]] = TtlCache(
            ttl_s * 5, max_entries
        )

    def invalidate(self) -> None:
        for cache in (self._keys, self._bad_keys, self._tenants, self._nodes, self._records):
            cache.clear()

    def cache_sizes(self) -> dict[str, int]:
        """Entries held per cache (for tests and diagnostics)."""
        return {
            "keys": len(self._keys),
            "bad_keys": len(self._bad_keys),
            "trusted": len(self._trusted),
            "tenants": len(self._tenants),
            "nodes": len(self._nodes),
            "records": len(self._records),
        }

    def vouched(self, api_key: str) -> bool:
        return self._trusted.contains(key_digest(api_key))

    async def tenant_for_key(self, api_key: str) -> str | None:
        digest = key_digest(api_key)
        tenant = self._keys.get(digest)
        if tenant is not None:
            return tenant
        if self._bad_keys.contains(digest) or len(api_key) < MIN_KEY_LEN:
            return None
        generation = self._keys.generation

        async def load() -> str | None:
            self.sql_key_lookups += 1
            rec = await asyncio.to_thread(self._resolve_key, api_key)
            if generation == self._keys.generation:
                self._remember(digest, rec)
            return None if rec is None else rec.name

        return await self._key_flight.do(digest, load)

    def _remember(self, digest: bytes, rec: TenantRecord | None) -> None:
        if rec is None:
            self._bad_keys.put(digest, True)
            self._trusted.pop(digest)
            return
        self._keys.put(digest, rec.name)
        self._trusted.put(digest, True)
        self._tenants.put(rec.name, tenant_info(rec))

    def _resolve_key(self, api_key: str) -> TenantRecord | None:
        with self.db.reader() as r:
            return r.keys.resolve(plaintext=api_key)

    async def tenant(self, name: str) -> TenantInfo:
        async def load() -> TenantInfo:
            rec = await asyncio.to_thread(self._get_tenant, name)
            if rec is None:
                raise ApiError(401, f"Tenant {name!r} no longer exists.", code="invalid_api_key")
            return tenant_info(rec)

        return await self._tenants.get_or_load(name, load)

    def _get_tenant(self, name: str) -> TenantRecord | None:
        with self.db.reader() as r:
            return r.tenants.get_tenant(name=name)

    async def resolve(self, tenant: TenantInfo, app: str, agent: str) -> NodeInfo:
        key = (tenant.name, app, agent)
        hit = self._nodes.get(key)
        if hit is not None and hit.tenant == tenant:
            return hit
        records = await self._records.get_or_load(
            key, lambda: asyncio.to_thread(self._nodes_of, tenant.name, app, agent)
        )
        app_rec, agent_rec = records
        app_slo = SloDefaults(app_rec.slo_ttft_ms, app_rec.slo_tpot_ms, app_rec.slo_e2e_ms)
        agent_slo = SloDefaults(agent_rec.slo_ttft_ms, agent_rec.slo_tpot_ms, agent_rec.slo_e2e_ms)
        tier = agent_rec.priority_tier if agent_rec.priority_tier is not None else tenant.tier
        node = NodeInfo(
            tenant=tenant,
            app=app,
            agent=agent,
            app_weight=app_rec.weight,
            agent_weight=agent_rec.weight,
            tier=max(tier, tenant.tier),
            slo=agent_slo.over(app_slo).over(tenant.slo),
        )
        return self._nodes.put(key, node)

    def _nodes_of(self, tenant: str, app: str, agent: str) -> tuple[AppRecord, AgentRecord]:
        if self.strict:
            with self.db.reader() as r:
                app_rec = r.tenants.get_app(tenant=tenant, name=app)
                agent_rec = r.tenants.get_agent(tenant=tenant, app=app, name=agent)
            if app_rec is None or agent_rec is None:
                missing = f"application {app!r}" if app_rec is None else f"agent {agent!r}"
                raise ApiError(
                    403,
                    f"Unknown {missing} for tenant {tenant!r} (strict mode).",
                    code="unknown_node",
                    param="X-Arbiter-App" if app_rec is None else "X-Arbiter-Agent",
                )
            return app_rec, agent_rec
        with self.db.repos() as r:
            return (
                r.tenants.get_or_create_app(tenant=tenant, name=app),
                r.tenants.get_or_create_agent(tenant=tenant, app=app, name=agent),
            )


class RedisModelCatalog:
    """Models served by healthy registered workers (Redis), priced from the SQL registry."""

    def __init__(self, stores: StateStores, db: Database, ttl_s: float = 1.0) -> None:
        self.stores = stores
        self.db = db
        self._cache: TtlCache[str, list[ModelEntry]] = TtlCache(ttl_s)

    async def served(self) -> list[ModelEntry]:
        return await self._cache.get_or_load("all", self._load)

    async def _load(self) -> list[ModelEntry]:
        workers = await self.stores.workers.list()
        metrics = await self.stores.workers.metrics()
        active: dict[str, list[int | None]] = {}  # per model, what each active worker reports
        other: dict[str, list[int | None]] = {}  # … and each other one (draining, unhealthy)
        for w in workers:
            sample = metrics[w.id][0] if w.id in metrics else None
            served = dict((sample.models if sample else None) or {})
            if w.model and not served:
                served[w.model] = None  # not scraped yet: its length is unknown
            for name, max_len in served.items():
                (active if w.active else other).setdefault(name, []).append(max_len)
        records = {m.name: m for m in await asyncio.to_thread(self._models)}
        entries = []
        for name in sorted(active.keys() | other.keys()):
            rec = records.get(name)
            shortest, longest = _contexts(active.get(name) or other[name])
            entries.append(
                ModelEntry(
                    name,
                    shortest,
                    _factor(name, rec),
                    _rule(name, rec),
                    kind=rec.kind if rec else "llm",
                    generation=_generation(name, rec),
                    longest_context=longest,
                )
            )
        return entries

    def _models(self) -> list[ModelRecord]:
        with self.db.reader() as r:
            return r.models.list()

    async def require(self, name: str) -> ModelEntry:
        for entry in await self.served():
            if entry.name == name:
                return entry
        raise ApiError(
            404,
            f"The model '{name}' does not exist or no worker serves it.",
            param="model",
            code="model_not_found",
        )


def _contexts(lengths: list[int | None]) -> tuple[int | None, int | None]:
    """(shortest known, longest) context of a model's workers; the longest only when every
    one is known (a worker of unknown length may hold more)."""
    known = [n for n in lengths if n is not None]
    shortest = min(known, default=None)
    return shortest, (max(known) if known and len(known) == len(lengths) else None)


class RedisDoorLimits:
    """Per-tenant limits at the door, shared by every gateway replica through Redis.

    Checked after authentication and before the request is stored, in this order; each refusal
    is a 429 in OpenAI's shape with `Retry-After` (a refused request uses no token budget):

    - `rate_limit_rps`: a token bucket of that many requests per second on average, bursts of
      2 s of rate (code `rate_limit_exceeded`).
    - `token_budget`: the most tokens (prompt + completion, as the worker's usage reports them,
      else the gateway's prompt estimate) a tenant may consume per UTC day. A request is refused
      while the tokens used today are >= the budget (code `token_budget_exceeded`, Retry-After
      = seconds to the next UTC midnight). Usage is counted by `charge` when a request finishes
      (any status), so requests already accepted are never cut off and the day's usage may
      overshoot the budget by what was in flight when it was reached.

    A limit that is None costs nothing: no Redis command is sent for it, checked or charged.
    Usage is counted only while the tenant has a budget. Each refusal is reported to
    `on_refused` with its code (the gateway counts them in `arbiter_gateway_rejected`).
    """

    def __init__(
        self, stores: StateStores, on_refused: Callable[[str], None] | None = None
    ) -> None:
        self.stores = stores
        self._on_refused = on_refused

    def _refuse(self, err: ApiError) -> ApiError:
        if self._on_refused is not None and err.code:
            self._on_refused(err.code)
        return err

    async def check(self, tenant: TenantInfo, now: float) -> None:
        await self._check_rate(tenant, now)
        await self._check_budget(tenant, now)

    async def today(self, tenant: TenantInfo, now: float) -> dict[str, int | None]:
        """`token_budget` and `tokens_today` (both None for a tenant without a budget)."""
        if tenant.token_budget is None:
            return {"token_budget": None, "tokens_today": None}
        used = await self.stores.token_budgets.used(tenant.name, now)
        return {"token_budget": tenant.token_budget, "tokens_today": used}

    async def charge(self, tenant: TenantInfo, tokens: int, now: float) -> None:
        if tenant.token_budget is None or tokens <= 0:
            return
        await self.stores.token_budgets.add(tenant.name, tokens, now)

    async def _check_rate(self, tenant: TenantInfo, now: float) -> None:
        rate = tenant.rate_limit_rps
        if not rate:
            return
        ok, retry = await self.stores.rate_limiter.allow(tenant.name, rate, max(1.0, 2 * rate), now)
        if not ok:
            raise self._refuse(
                ApiError(
                    429,
                    f"Rate limit of {rate:g} requests/s exceeded for tenant {tenant.name!r}.",
                    code="rate_limit_exceeded",
                    headers={"Retry-After": str(max(1, round(retry + 0.5)))},
                )
            )

    async def _check_budget(self, tenant: TenantInfo, now: float) -> None:
        budget = tenant.token_budget
        if budget is None:
            return
        used = await self.stores.token_budgets.used(tenant.name, now)
        if used >= budget:
            raise self._refuse(
                ApiError(
                    429,
                    f"Token budget of {budget} tokens per UTC day exhausted for tenant "
                    f"{tenant.name!r}: {used} tokens used today; it resets at 00:00 UTC.",
                    code="token_budget_exceeded",
                    headers={"Retry-After": str(seconds_to_next_day(now))},
                )
            )


def _rule(name: str, rec: ModelRecord | None) -> ImageTokenRule | None:
    """The model's image-token rule; a stored one the admin API would refuse is logged and
    ignored (its images are then estimated as any text model's)."""
    if rec is None or rec.image_tokens is None:
        return None
    try:
        return ImageTokenRule.model_validate(rec.image_tokens)
    except ValueError as exc:
        log.warning("model %r: invalid image_tokens (%s); ignored", name, exc)
        return None


def _generation(name: str, rec: ModelRecord | None) -> GenerationRule | None:
    """An image model's generation rule; the default rule when none (or an invalid one, which
    is logged) is stored; None for every other kind."""
    if rec is None or rec.kind != "image":
        return None
    try:
        return GenerationRule.model_validate(rec.generation or {})
    except ValueError as exc:
        log.warning("model %r: invalid generation rule (%s); the default is used", name, exc)
        return GenerationRule()


def _factor(name: str, rec: ModelRecord | None) -> float:
    """The model's Unified Token factor; an unregistered model costs what the base costs. A
    stored shape the admin API would refuse (written around it) is logged and priced at 1.0,
    so one bad row cannot stop every model from being served."""
    if rec is None:
        return 1.0
    shape = ModelShape(
        hidden_size=rec.hidden_size,
        num_layers=rec.num_layers,
        unified_cost_factor=rec.unified_cost_factor,
    )
    try:
        return unit_factor(shape)
    except ValueError as exc:
        log.warning("model %r: %s; priced as the base model", name, exc)
        return 1.0
