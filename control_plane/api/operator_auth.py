"""Who is calling the admin API, and what their role lets them do.

Rule (`allowed`): a viewer may only read (GET/HEAD), except the operator list (admins only);
an operator may also steer — weights, knobs, the policy, drain/undrain — and an admin may do
everything (operators, keys, tenants, models, workers). Only tokens shaped like an operator
token (`arbop-…`) are looked up in SQL, so guessing costs no query. Operator tokens resolve
through a bounded 2-second cache (`OperatorTokens`), so the admin hot path (the console polls
every few seconds) rarely touches SQL; a revocation clears this gateway's cache at once and
reaches the others within the TTL.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

from control_plane.gateway.cache import SingleFlight, TtlCache
from storage.db import Database
from storage.repos.keys import MIN_KEY_LEN
from storage.repos.operators import TOKEN_PREFIX

READS = frozenset({"GET", "HEAD"})
STEERING = frozenset(
    {
        ("PUT", "/weights/{node:path}"),
        ("PUT", "/knobs/{name}"),
        ("PUT", "/policy"),
        ("POST", "/workers/{worker_id}/drain"),
        ("POST", "/workers/{worker_id}/undrain"),
    }
)
"""The changes an `operator` may make: (method, route template under `/admin`)."""
ADMIN_READS = frozenset({("GET", "/operators"), ("HEAD", "/operators")})
"""Reads only an admin may make: who the operators are (names, roles, token prefixes)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated admin caller: the audit actor and the role that bounds what it may do.
    `bootstrap` is true for the shared `ARBITER_ADMIN_TOKEN`."""

    name: str
    role: str
    bootstrap: bool = False


def allowed(role: str, method: str, route: str) -> bool:
    """Whether `role` may call `method route` (a route template such as '/admin/policy')."""
    key = (method, _under_admin(route))
    if role == "admin" or (method in READS and key not in ADMIN_READS):
        return True
    return role == "operator" and key in STEERING


def needed_role(method: str, route: str) -> str:
    """The least role that may call this route (for the 403 message)."""
    key = (method, _under_admin(route))
    if method in READS and key not in ADMIN_READS:
        return "viewer"
    return "operator" if key in STEERING else "admin"


def _under_admin(route: str) -> str:
    # FastAPI may report an included route by its own template, without the router's prefix.
    return route.removeprefix("/admin")


class OperatorTokens:
    """Operator token → Principal from SQL, cached: valid tokens for `ttl_s`, unknown or
    revoked ones for `ttl_s` too (so neither a poll loop nor a wrong token costs SQL per
    request); at most `max_entries` each; single-flight per token; tokens shorter than any
    issued token never reach SQL."""

    def __init__(self, db: Database, *, ttl_s: float = 2.0, max_entries: int = 1_000) -> None:
        self.db = db
        self.sql_lookups = 0
        self._good: TtlCache[bytes, Principal] = TtlCache(ttl_s, max_entries)
        self._bad: TtlCache[bytes, bool] = TtlCache(ttl_s, max_entries)
        self._flight: SingleFlight[bytes, Principal | None] = SingleFlight()

    def invalidate(self) -> None:
        """Forget everything (after an operator is created or revoked)."""
        self._good.clear()
        self._bad.clear()

    async def principal(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode()).digest()
        found = self._good.get(digest)
        if found is not None:
            return found
        if not token.startswith(TOKEN_PREFIX) or len(token) < MIN_KEY_LEN:
            return None
        if self._bad.contains(digest):
            return None
        generation = self._good.generation

        async def load() -> Principal | None:
            self.sql_lookups += 1
            who = await asyncio.to_thread(self._resolve, token)
            if generation == self._good.generation:
                if who is None:
                    self._bad.put(digest, True)
                else:
                    self._good.put(digest, who)
            return who

        return await self._flight.do(digest, load)

    def _resolve(self, token: str) -> Principal | None:
        with self.db.reader() as r:
            rec = r.operators.resolve(token=token)
        return None if rec is None else Principal(rec.name, rec.role)
