"""Operator accounts: a token shown once at creation, stored only as a SHA-256 digest."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.errors import AlreadyExistsError, InvalidValueError, NotFoundError
from storage.models.operators import ROLES, OperatorAccount
from storage.records import record_from
from storage.repos.fields import check_name
from storage.repos.keys import PREFIX_LEN, hash_key

TOKEN_PREFIX = "arbop-"


@dataclass(frozen=True, slots=True)
class OperatorRecord:
    """An operator's public face: name, role, display prefix and state; never the token."""

    id: int
    name: str
    role: str
    prefix: str
    created_at: float
    revoked_at: float | None


def new_operator_token() -> str:
    """A fresh token: `arbop-` + 43 URL-safe characters (256 bits)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class OperatorRepo:
    """Creates, resolves, lists and revokes operators. The plaintext token exists only in the
    value `create` returns; a revoked or unknown token resolves to None; names are never reused."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def create(self, *, name: str, role: str) -> tuple[OperatorRecord, str]:
        """A new operator → (its record, its token: shown once, never stored)."""
        if role not in ROLES:
            raise InvalidValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        check_name(name, "operator")  # the API revokes it by name in a URL path
        token = new_operator_token()
        row = OperatorAccount(
            name=name,
            role=role,
            prefix=token[:PREFIX_LEN],
            token_hash=hash_key(token),
            created_at=time.time(),
        )
        try:
            with self.session.begin_nested():
                self.session.add(row)
        except IntegrityError as exc:
            raise AlreadyExistsError(f"operator {name!r} already exists") from exc
        return _record(row), token

    def resolve(self, *, token: str) -> OperatorRecord | None:
        """The operator holding this token, or None when it is unknown or revoked."""
        stmt = select(OperatorAccount).where(
            OperatorAccount.token_hash == hash_key(token), OperatorAccount.revoked_at.is_(None)
        )
        row = self.session.scalars(stmt).one_or_none()
        return None if row is None else _record(row)

    def get(self, *, name: str) -> OperatorRecord:
        row = self.session.scalars(
            select(OperatorAccount).where(OperatorAccount.name == name)
        ).one_or_none()
        if row is None:
            raise NotFoundError(f"operator {name!r} does not exist")
        return _record(row)

    def revoke(self, *, name: str) -> OperatorRecord:
        """Revoke an operator's token (idempotent: revoking twice keeps the first time)."""
        self.session.execute(
            update(OperatorAccount)
            .where(OperatorAccount.name == name, OperatorAccount.revoked_at.is_(None))
            .values(revoked_at=time.time())
        )
        return self.get(name=name)

    def list(self) -> list[OperatorRecord]:
        """Every operator (revoked ones included), oldest first."""
        rows = self.session.scalars(
            select(OperatorAccount).order_by(OperatorAccount.created_at, OperatorAccount.id)
        )
        return [_record(row) for row in rows]


def _record(row: OperatorAccount) -> OperatorRecord:
    return record_from(OperatorRecord, row.to_dict())
