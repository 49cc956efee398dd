"""API keys: shown once at creation, stored only as a SHA-256 digest."""

from __future__ import annotations

import hashlib
import secrets
import time

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from storage.errors import InvalidValueError, NotFoundError
from storage.models import ApiKey, Tenant
from storage.records import ApiKeyRecord, TenantRecord, record_from
from storage.repos.fields import INT32_MAX
from storage.repos.tenants import tenant_record

KEY_PREFIX = "arb-"
PREFIX_LEN = 12
MIN_KEY_LEN = 24


def hash_key(plaintext: str) -> str:
    """The stored digest of a key. Keys carry 256 random bits, so a fast hash is enough:
    there is nothing to brute-force, and lookups stay O(1) through a unique index."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def new_key() -> str:
    """A fresh key: `arb-` + 43 URL-safe characters (256 bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class KeyRepo:
    """Issues, resolves, lists and revokes API keys. The plaintext exists only in the value
    `create` returns; revoked keys and unknown keys resolve to None."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def create(
        self, *, tenant: str, label: str | None = None, plaintext: str | None = None
    ) -> tuple[ApiKeyRecord, str]:
        """A new key for `tenant` → (its record, the plaintext — shown once, never stored).

        `plaintext` registers a key chosen elsewhere (e.g. a deployment's configured demo key).
        """
        owner = self.session.scalars(select(Tenant).where(Tenant.name == tenant)).one_or_none()
        if owner is None:
            raise NotFoundError(f"tenant {tenant!r} does not exist")
        key = new_key() if plaintext is None else plaintext
        if len(key) < MIN_KEY_LEN:
            raise InvalidValueError(f"an API key needs at least {MIN_KEY_LEN} characters")
        row = ApiKey(
            tenant_id=owner.id,
            prefix=key[:PREFIX_LEN],
            key_hash=hash_key(key),
            label=label,
            created_at=time.time(),
        )
        self.session.add(row)
        self.session.flush()
        return _key_record(row, tenant), key

    def resolve(self, *, plaintext: str) -> TenantRecord | None:
        """The tenant owning this key, or None when the key is unknown or revoked."""
        stmt = (
            select(Tenant)
            .join(ApiKey, ApiKey.tenant_id == Tenant.id)
            .where(ApiKey.key_hash == hash_key(plaintext), ApiKey.revoked_at.is_(None))
        )
        row = self.session.scalars(stmt).one_or_none()
        return None if row is None else tenant_record(row)

    def revoke(self, *, key_id: int) -> ApiKeyRecord:
        """Revoke a key (idempotent: revoking twice keeps the first time)."""
        if not 1 <= key_id <= INT32_MAX:  # no such id: a driver would raise on the value
            raise NotFoundError(f"API key {key_id} does not exist")
        self.session.execute(
            update(ApiKey)
            .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=time.time())
        )
        found = _list_keys(self.session, ApiKey.id == key_id)
        if not found:
            raise NotFoundError(f"API key {key_id} does not exist")
        return found[0]

    def list(self, *, tenant: str | None = None) -> list[ApiKeyRecord]:
        """Keys (revoked ones included), oldest first, optionally of one tenant."""
        return _list_keys(self.session, None if tenant is None else Tenant.name == tenant)


def _key_record(row: ApiKey, tenant: str) -> ApiKeyRecord:
    return record_from(ApiKeyRecord, {**row.to_dict(), "tenant": tenant})


def _list_keys(session: Session, condition: ColumnElement[bool] | None) -> list[ApiKeyRecord]:
    stmt = select(ApiKey, Tenant.name).join(Tenant, ApiKey.tenant_id == Tenant.id)
    if condition is not None:
        stmt = stmt.where(condition)
    rows = session.execute(stmt.order_by(ApiKey.created_at, ApiKey.id))
    return [_key_record(row, name) for row, name in rows]
