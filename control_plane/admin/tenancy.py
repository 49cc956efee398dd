"""Tenants, applications, agents and API keys as audited operations on the database.

The admin API and the `arbiter admin tenants|keys` commands (and `arbiter up`'s demo tenant) call
these same functions, so a change lands with the same audit row whichever door it came
through. Each function is one transaction: the change and its audit row commit together or
not at all. A node of the hierarchy is named by its path: `(tenant,)`, `(tenant, app)` or
`(tenant, app, agent)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from storage.db import Database, Repos
from storage.errors import ChangedMeanwhile, NotFoundError
from storage.records import AgentRecord, ApiKeyRecord, AppRecord, TenantNode, TenantRecord
from storage.write_guard import classified

NodePath = tuple[str, ...]
NodeRecord = TenantRecord | AppRecord | AgentRecord
KINDS = {1: "tenant", 2: "app", 3: "agent"}


def node_kind(path: NodePath) -> str:
    """'tenant', 'app' or 'agent' by the path's depth."""
    kind = KINDS.get(len(path))
    if kind is None:
        raise ValueError(f"a node path has 1 to 3 names, got {path!r}")
    return kind


def node_target(path: NodePath) -> str:
    """The audit target of a node: `tenant:acme`, `app:acme/chat`, `agent:acme/chat/plan`."""
    return f"{node_kind(path)}:{'/'.join(path)}"


def _find(r: Repos, path: NodePath, lock: bool = False) -> NodeRecord | None:
    if len(path) == 1:
        return r.tenants.get_tenant(name=path[0], for_update=lock)
    if len(path) == 2:
        return r.tenants.get_app(tenant=path[0], name=path[1], for_update=lock)
    return r.tenants.get_agent(tenant=path[0], app=path[1], name=path[2], for_update=lock)


def _require(r: Repos, path: NodePath, lock: bool = False) -> NodeRecord:
    record = _find(r, path, lock)
    if record is None:
        raise NotFoundError(f"{node_kind(path)} {'/'.join(path)} does not exist")
    return record


def _fields_of(record: NodeRecord, names: Mapping[str, Any]) -> dict[str, Any]:
    return {name: getattr(record, name) for name in names}


def get_node(db: Database, path: NodePath) -> NodeRecord:
    """The node's record; NotFoundError when it does not exist."""
    with db.reader() as r:
        return _require(r, path)


def weight_of(db: Database, path: NodePath) -> float | None:
    """The node's committed weight, or None when it does not exist (what the `weights` knob
    should hold for it); a database error as `StorageUnavailable` or `RowsRejected` (both
    `StorageError`), so a caller telling the running system of a committed change can warn."""
    with classified(), db.reader() as r:
        record = _find(r, path)
    return None if record is None else float(record.weight)


def list_children(db: Database, path: NodePath) -> list[NodeRecord]:
    """Tenants (path `()`), a tenant's applications, or an application's agents."""
    with db.reader() as r:
        if not path:
            return list(r.tenants.list_tenants())
        if len(path) == 1:
            return list(r.tenants.list_apps(tenant=path[0]))
        return list(r.tenants.list_agents(tenant=path[0], app=path[1]))


def hierarchy(db: Database) -> list[TenantNode]:
    """Every tenant with its applications and agents."""
    with db.reader() as r:
        return r.tenants.hierarchy()


def create_node(
    db: Database, path: NodePath, fields: Mapping[str, Any], *, actor: str, reason: str
) -> NodeRecord:
    """Create a tenant, application or agent with `fields`; audited as `<kind>.create`."""
    kind = node_kind(path)
    values = dict(fields)
    with db.repos() as r:
        record: NodeRecord
        if kind == "tenant":
            record = r.tenants.create_tenant(name=path[0], **values)
        elif kind == "app":
            record = r.tenants.create_app(tenant=path[0], name=path[1], **values)
        else:
            record = r.tenants.create_agent(tenant=path[0], app=path[1], name=path[2], **values)
        r.audit.append(
            actor=actor,
            action=f"{kind}.create",
            target=node_target(path),
            old=None,
            new=_fields_of(record, values) | {"name": path[-1]},
            reason=reason,
        )
        return record


def update_node(
    db: Database,
    path: NodePath,
    changes: Mapping[str, Any],
    *,
    actor: str,
    reason: str,
    expected: Mapping[str, Any] | None = None,
) -> NodeRecord:
    """Apply `changes`; audited as `<kind>.update` with the old and new values of the fields
    that were sent. With `expected` (field → the value the caller read) only while the node
    still holds those values, read under a row lock (`ChangedMeanwhile` otherwise: nothing
    written), so a change decided on a stale read never replaces a later one."""
    kind = node_kind(path)
    with db.repos() as r:
        old = _require(r, path, lock=expected is not None)
        _check_expected(old, expected or {}, path)
        record: NodeRecord
        if kind == "tenant":
            record = r.tenants.update_tenant(name=path[0], changes=changes)
        elif kind == "app":
            record = r.tenants.update_app(tenant=path[0], name=path[1], changes=changes)
        else:
            record = r.tenants.update_agent(
                tenant=path[0], app=path[1], name=path[2], changes=changes
            )
        r.audit.append(
            actor=actor,
            action=f"{kind}.update",
            target=node_target(path),
            old=_fields_of(old, changes),
            new=_fields_of(record, changes),
            reason=reason,
        )
        return record


def _check_expected(record: NodeRecord, expected: Mapping[str, Any], path: NodePath) -> None:
    changed = {f: getattr(record, f) for f, v in expected.items() if getattr(record, f) != v}
    if changed:
        now = ", ".join(f"{f} is {v!r}" for f, v in changed.items())
        raise ChangedMeanwhile(
            f"{node_kind(path)} {'/'.join(path)} changed since it was read ({now} now): "
            "read it again and retry"
        )


def delete_node(db: Database, path: NodePath, *, actor: str, reason: str) -> NodeRecord:
    """Delete a node and its descendants (a tenant's keys too); → the deleted record."""
    kind = node_kind(path)
    with db.repos() as r:
        old = _require(r, path)
        if kind == "tenant":
            r.tenants.delete_tenant(name=path[0])
        elif kind == "app":
            r.tenants.delete_app(tenant=path[0], name=path[1])
        else:
            r.tenants.delete_agent(tenant=path[0], app=path[1], name=path[2])
        r.audit.append(
            actor=actor,
            action=f"{kind}.delete",
            target=node_target(path),
            old=dataclasses.asdict(old),
            new=None,
            reason=reason,
        )
        return old


# -- API keys ------------------------------------------------------------------------------


def _key_json(record: ApiKeyRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "tenant": record.tenant,
        "prefix": record.prefix,
        "label": record.label,
    }


def create_key(
    db: Database,
    *,
    tenant: str,
    actor: str,
    reason: str,
    label: str | None = None,
    plaintext: str | None = None,
) -> tuple[ApiKeyRecord, str]:
    """Issue a key → (its record, the plaintext: shown once, never stored)."""
    with db.repos() as r:
        record, key = r.keys.create(tenant=tenant, label=label, plaintext=plaintext)
        r.audit.append(
            actor=actor,
            action="key.create",
            target=f"key:{record.id}",
            old=None,
            new=_key_json(record),
            reason=reason,
        )
        return record, key


def revoke_key(db: Database, *, key_id: int, actor: str, reason: str) -> ApiKeyRecord:
    """Revoke a key (idempotent; only the first revocation is audited)."""
    with db.repos() as r:
        before = [k for k in r.keys.list() if k.id == key_id]
        record = r.keys.revoke(key_id=key_id)
        if before and before[0].revoked_at is None:
            r.audit.append(
                actor=actor,
                action="key.revoke",
                target=f"key:{key_id}",
                old=_key_json(record) | {"revoked_at": None},
                new=_key_json(record) | {"revoked_at": record.revoked_at},
                reason=reason,
            )
        return record


def list_keys(db: Database, *, tenant: str | None = None) -> list[ApiKeyRecord]:
    """Keys (prefix and state only), oldest first; NotFoundError for an unknown tenant."""
    with db.reader() as r:
        if tenant is not None and r.tenants.get_tenant(name=tenant) is None:
            raise NotFoundError(f"tenant {tenant!r} does not exist")
        return r.keys.list(tenant=tenant)


def create_tenant_with_key(
    db: Database,
    name: str,
    *,
    weight: float = 1.0,
    label: str | None = "default",
    plaintext: str | None = None,
    exist_ok: bool = True,
    actor: str = "arbiter",
    reason: str = "tenant created with an API key",
    **fields: Any,
) -> str:
    """Create tenant `name` (kept as is when it exists and `exist_ok`) and return an API key.

    With `plaintext` the key is registered as given, and a key already registered for this
    tenant is reused, so a deployment that restarts on the same database keeps its key.
    Otherwise a fresh key is issued on every call (keys are shown once).
    """
    with db.reader() as r:
        exists = r.tenants.get_tenant(name=name) is not None
        owner = None if plaintext is None else r.keys.resolve(plaintext=plaintext)
    if not exists or not exist_ok:
        create_node(db, (name,), {"weight": weight, **fields}, actor=actor, reason=reason)
    if owner is not None and owner.name == name:
        return str(plaintext)
    _, key = create_key(
        db, tenant=name, label=label, plaintext=plaintext, actor=actor, reason=reason
    )
    return key
