"""Operator accounts: the token is returned once and stored only as its digest; revoked and
unknown tokens do not resolve; names are unique and roles are checked."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from storage.db import Database
from storage.errors import AlreadyExistsError, InvalidValueError, NotFoundError


def test_create_stores_only_the_digest_and_resolves(db: Database) -> None:
    with db.repos() as r:
        record, token = r.operators.create(name="ann", role="operator")
    assert token.startswith("arbop-") and len(token) >= 40
    assert token.startswith(record.prefix) and (record.role, record.revoked_at) == (
        "operator",
        None,
    )
    with db.reader() as r:
        dump = str(list(r.session.execute(text("SELECT * FROM operators"))))
        assert r.operators.resolve(token=token) == record
        assert r.operators.resolve(token=token + "x") is None
    assert token not in dump and token[12:] not in dump
    assert hashlib.sha256(token.encode()).hexdigest() in dump


def test_revoked_token_stops_resolving_and_revoke_is_idempotent(db: Database) -> None:
    with db.repos() as r:
        _, token = r.operators.create(name="bob", role="viewer")
    with db.repos() as r:
        first = r.operators.revoke(name="bob")
    with db.repos() as r:
        again = r.operators.revoke(name="bob")
    assert first.revoked_at is not None and again.revoked_at == first.revoked_at
    with db.reader() as r:
        assert r.operators.resolve(token=token) is None
        assert [o.name for o in r.operators.list()] == ["bob"]


def test_names_are_unique_roles_checked_unknown_names_404(db: Database) -> None:
    with db.repos() as r:
        r.operators.create(name="ann", role="admin")
    with pytest.raises(AlreadyExistsError), db.repos() as r:
        r.operators.create(name="ann", role="viewer")
    with pytest.raises(InvalidValueError), db.repos() as r:
        r.operators.create(name="cy", role="root")
    for name in ("ops team", "a#b", "a/b", "-x", "é"):  # the API could not revoke them by name
        with pytest.raises(InvalidValueError, match="operator name"), db.repos() as r:
            r.operators.create(name=name, role="viewer")
    with pytest.raises(NotFoundError), db.repos() as r:
        r.operators.revoke(name="nobody")
    with db.reader() as r:
        assert [(o.name, o.role) for o in r.operators.list()] == [("ann", "admin")]
