"""API keys: the plaintext is returned once and never stored; revoked keys do not resolve."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import text

from storage.db import Database
from storage.errors import InvalidValueError, NotFoundError


def _all_text_in_database(db: Database) -> str:
    with db.reader() as r:
        tables = ["tenants", "applications", "agents", "api_keys", "audit_log"]
        rows = [
            str(tuple(row)) for t in tables for row in r.session.execute(text(f"SELECT * FROM {t}"))
        ]
    return "\n".join(rows)


def test_create_returns_plaintext_once_and_stores_only_its_hash(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme")
        record, key = r.keys.create(tenant="acme", label="ci")
    assert key.startswith("arb-") and len(key) >= 40
    assert key.startswith(record.prefix) and len(record.prefix) == 12
    assert (record.tenant, record.label, record.revoked_at) == ("acme", "ci", None)
    dump = _all_text_in_database(db)
    assert key not in dump
    assert key[12:] not in dump  # not even the secret part after the display prefix
    assert hashlib.sha256(key.encode()).hexdigest() in dump
    if db.dialect == "sqlite":
        assert db.engine.url.database is not None
        db.dispose()  # checkpoint nothing on purpose: scan the main file and the WAL
        raw = b"".join(
            p.read_bytes()
            for p in Path(db.engine.url.database).parent.iterdir()
            if p.name.startswith("arbiter.db")
        )
        assert key.encode() not in raw


def test_resolve_known_unknown_and_revoked(db: Database) -> None:
    with db.repos() as r:
        acme = r.tenants.create_tenant(name="acme")
        r.tenants.create_tenant(name="beta")
        first, key1 = r.keys.create(tenant="acme")
        _, key2 = r.keys.create(tenant="acme")
        _, key3 = r.keys.create(tenant="beta")
    with db.reader() as r:
        assert r.keys.resolve(plaintext=key1) == acme
        owner = r.keys.resolve(plaintext=key3)
        assert owner is not None and owner.name == "beta"
        assert r.keys.resolve(plaintext=key1 + "x") is None
        assert r.keys.resolve(plaintext="") is None
    with db.repos() as r:
        revoked = r.keys.revoke(key_id=first.id)
        assert revoked.revoked_at is not None
        again = r.keys.revoke(key_id=first.id)
        assert again.revoked_at == revoked.revoked_at
        for missing in (10_000, 0, -1, 2**31, 10**23):  # past INTEGER: an OverflowError before
            with pytest.raises(NotFoundError):
                r.keys.revoke(key_id=missing)
    with db.reader() as r:
        assert r.keys.resolve(plaintext=key1) is None
        assert r.keys.resolve(plaintext=key2) == acme
        listed = r.keys.list(tenant="acme")
        assert len(listed) == 2 and listed[0].id == first.id
        assert [k.revoked_at is None for k in listed] == [False, True]
        assert len(r.keys.list()) == 3


def test_registering_a_chosen_key_and_errors(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme")
        record, key = r.keys.create(tenant="acme", plaintext="arb-demo-0123456789abcdefghij")
        assert key == "arb-demo-0123456789abcdefghij" and record.prefix == "arb-demo-012"
        with pytest.raises(InvalidValueError):
            r.keys.create(tenant="acme", plaintext="short")
        with pytest.raises(NotFoundError):
            r.keys.create(tenant="nobody")
    with db.reader() as r:
        resolved = r.keys.resolve(plaintext="arb-demo-0123456789abcdefghij")
        assert resolved is not None and resolved.name == "acme"
