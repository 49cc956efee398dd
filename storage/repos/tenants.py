"""Tenants, applications and agents: CRUD, get-or-create on first use, hierarchy snapshot."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, TypeVar, Unpack

from sqlalchemy import Select, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.dialects import insert_for
from storage.errors import AlreadyExistsError, NotFoundError
from storage.models import Agent, Application, Tenant, table_of
from storage.records import (
    AgentRecord,
    AppNode,
    AppRecord,
    TenantNode,
    TenantRecord,
    record_from,
)
from storage.repos.fields import (
    AGENT_FIELDS,
    APP_FIELDS,
    TENANT_FIELDS,
    AgentFields,
    AppFields,
    TenantFields,
    check_fields,
    check_name,
)

_TENANT_NOT_NULL = frozenset({"weight", "priority_tier"})


def tenant_record(row: Tenant) -> TenantRecord:
    """The immutable record of a tenant row."""
    return record_from(TenantRecord, row.to_dict())


def app_record(row: Application, tenant: str) -> AppRecord:
    """The immutable record of an application row."""
    return record_from(AppRecord, {**row.to_dict(), "tenant": tenant})


def agent_record(row: Agent, tenant: str, app: str) -> AgentRecord:
    """The immutable record of an agent row."""
    return record_from(AgentRecord, {**row.to_dict(), "tenant": tenant, "app": app})


class TenantRepo:
    """Tenants → applications → agents. Names are unique among siblings; deleting a node
    deletes its descendants (and a tenant's keys) but never request history. Applications and
    agents created on first use get weight 1 and inherit SLOs and tier from above."""

    def __init__(self, session: Session) -> None:
        self.session = session

    # -- tenants ---------------------------------------------------------------------------
    def create_tenant(self, *, name: str, **fields: Unpack[TenantFields]) -> TenantRecord:
        """Create a tenant; `fields` are any of weight, priority_tier, SLO ms, limits."""
        values = check_fields(fields, TENANT_FIELDS, not_null=_TENANT_NOT_NULL)
        row = Tenant(name=check_name(name, "tenant"), **values)
        self._add(row, f"tenant {name!r} already exists")
        return tenant_record(row)

    def get_tenant(self, *, name: str, for_update: bool = False) -> TenantRecord | None:
        """The tenant named `name`, or None; `for_update` locks its row (PostgreSQL) until the
        transaction ends and reads it afresh, for a read-compare-write."""
        row = self._tenant_row(name, required=False, lock=for_update)
        return None if row is None else tenant_record(row)

    def list_tenants(self) -> list[TenantRecord]:
        """Every tenant, by name."""
        rows = self.session.scalars(select(Tenant).order_by(Tenant.name))
        return [tenant_record(row) for row in rows]

    def update_tenant(self, *, name: str, changes: Mapping[str, Any]) -> TenantRecord:
        """Apply `changes` (field → value); raises NotFoundError or InvalidValueError."""
        values = check_fields(changes, TENANT_FIELDS, not_null=_TENANT_NOT_NULL)
        row = self._require_tenant(name)
        for key, value in values.items():
            setattr(row, key, value)
        self.session.flush()
        return tenant_record(row)

    def delete_tenant(self, *, name: str) -> bool:
        """Delete a tenant with its applications, agents and keys; False if it did not exist."""
        row = self._tenant_row(name, required=False)
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True

    # -- applications ----------------------------------------------------------------------
    def create_app(self, *, tenant: str, name: str, **fields: Unpack[AppFields]) -> AppRecord:
        """Create an application; `fields` are weight and SLO ms."""
        values = check_fields(fields, APP_FIELDS, not_null=frozenset({"weight"}))
        owner = self._require_tenant(tenant)
        row = Application(tenant_id=owner.id, name=check_name(name, "application"), **values)
        self._add(row, f"application {tenant}/{name} already exists")
        return app_record(row, tenant)

    def get_app(self, *, tenant: str, name: str, for_update: bool = False) -> AppRecord | None:
        """The application, or None (`for_update`: as for `get_tenant`)."""
        row = self._app_row(tenant, name, lock=for_update)
        return None if row is None else app_record(row, tenant)

    def list_apps(self, *, tenant: str) -> list[AppRecord]:
        """A tenant's applications, by name."""
        owner = self._require_tenant(tenant)
        rows = self.session.scalars(
            select(Application).where(Application.tenant_id == owner.id).order_by(Application.name)
        )
        return [app_record(row, tenant) for row in rows]

    def update_app(self, *, tenant: str, name: str, changes: Mapping[str, Any]) -> AppRecord:
        """Apply `changes` to an application; raises NotFoundError or InvalidValueError."""
        values = check_fields(changes, APP_FIELDS, not_null=frozenset({"weight"}))
        row = self._require_app(tenant, name)
        for key, value in values.items():
            setattr(row, key, value)
        self.session.flush()
        return app_record(row, tenant)

    def delete_app(self, *, tenant: str, name: str) -> bool:
        """Delete an application and its agents; False if it did not exist."""
        row = self._app_row(tenant, name)
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True

    def get_or_create_app(self, *, tenant: str, name: str) -> AppRecord:
        """The application, created with default weight if new (safe under concurrency)."""
        owner = self._require_tenant(tenant)
        check_name(name, "application")
        stmt = insert_for(self.session, table_of(Application)).values(
            tenant_id=owner.id, name=name, weight=1.0, created_at=time.time()
        )
        self.session.execute(stmt.on_conflict_do_nothing(index_elements=["tenant_id", "name"]))
        return app_record(self._require_app(tenant, name), tenant)

    # -- agents ----------------------------------------------------------------------------
    def create_agent(
        self, *, tenant: str, app: str, name: str, **fields: Unpack[AgentFields]
    ) -> AgentRecord:
        """Create an agent; `fields` are weight, priority_tier (override) and SLO ms."""
        values = check_fields(fields, AGENT_FIELDS, not_null=frozenset({"weight"}))
        parent = self._require_app(tenant, app)
        row = Agent(app_id=parent.id, name=check_name(name, "agent"), **values)
        self._add(row, f"agent {tenant}/{app}/{name} already exists")
        return agent_record(row, tenant, app)

    def get_agent(
        self, *, tenant: str, app: str, name: str, for_update: bool = False
    ) -> AgentRecord | None:
        """The agent, or None (`for_update`: as for `get_tenant`)."""
        row = self._agent_row(tenant, app, name, lock=for_update)
        return None if row is None else agent_record(row, tenant, app)

    def list_agents(self, *, tenant: str, app: str) -> list[AgentRecord]:
        """An application's agents, by name."""
        parent = self._require_app(tenant, app)
        rows = self.session.scalars(
            select(Agent).where(Agent.app_id == parent.id).order_by(Agent.name)
        )
        return [agent_record(row, tenant, app) for row in rows]

    def update_agent(
        self, *, tenant: str, app: str, name: str, changes: Mapping[str, Any]
    ) -> AgentRecord:
        """Apply `changes` to an agent; raises NotFoundError or InvalidValueError."""
        values = check_fields(changes, AGENT_FIELDS, not_null=frozenset({"weight"}))
        row = self._agent_row(tenant, app, name)
        if row is None:
            raise NotFoundError(f"agent {tenant}/{app}/{name} does not exist")
        for key, value in values.items():
            setattr(row, key, value)
        self.session.flush()
        return agent_record(row, tenant, app)

    def delete_agent(self, *, tenant: str, app: str, name: str) -> bool:
        """Delete an agent; False if it did not exist."""
        row = self._agent_row(tenant, app, name)
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True

    def get_or_create_agent(self, *, tenant: str, app: str, name: str) -> AgentRecord:
        """The agent (and its application), created with default weights if new."""
        parent = self.get_or_create_app(tenant=tenant, name=app)
        check_name(name, "agent")
        stmt = insert_for(self.session, table_of(Agent)).values(
            app_id=parent.id, name=name, weight=1.0, created_at=time.time()
        )
        self.session.execute(stmt.on_conflict_do_nothing(index_elements=["app_id", "name"]))
        row = self._agent_row(tenant, app, name)
        assert row is not None  # just inserted or already there; deletes cascade only with it
        return agent_record(row, tenant, app)

    # -- snapshot --------------------------------------------------------------------------
    def hierarchy(self) -> list[TenantNode]:
        """Every tenant with its applications and agents (three queries, sorted by name)."""
        tenants = list(self.session.scalars(select(Tenant).order_by(Tenant.name)))
        apps = list(self.session.scalars(select(Application).order_by(Application.name)))
        agents = list(self.session.scalars(select(Agent).order_by(Agent.name)))
        names = {t.id: t.name for t in tenants}
        agents_of: dict[int, list[Agent]] = {}
        for agent in agents:
            agents_of.setdefault(agent.app_id, []).append(agent)
        apps_of: dict[int, list[AppNode]] = {}
        for app in apps:
            tenant = names[app.tenant_id]
            kids = tuple(agent_record(a, tenant, app.name) for a in agents_of.get(app.id, []))
            apps_of.setdefault(app.tenant_id, []).append(AppNode(app_record(app, tenant), kids))
        return [TenantNode(tenant_record(t), tuple(apps_of.get(t.id, []))) for t in tenants]

    # -- rows ------------------------------------------------------------------------------
    def _add(self, row: Tenant | Application | Agent, conflict: str) -> None:
        try:
            with self.session.begin_nested():
                self.session.add(row)
        except IntegrityError as exc:
            raise AlreadyExistsError(conflict) from exc

    def _tenant_row(self, name: str, *, required: bool, lock: bool = False) -> Tenant | None:
        stmt = _locked(select(Tenant).where(Tenant.name == name), lock)
        row = self.session.scalars(stmt).one_or_none()
        if row is None and required:
            raise NotFoundError(f"tenant {name!r} does not exist")
        return row

    def _require_tenant(self, name: str) -> Tenant:
        row = self._tenant_row(name, required=True)
        assert row is not None
        return row

    def _app_row(self, tenant: str, name: str, *, lock: bool = False) -> Application | None:
        stmt = (
            select(Application)
            .join(Tenant, Application.tenant_id == Tenant.id)
            .where(Tenant.name == tenant, Application.name == name)
        )
        return self.session.scalars(_locked(stmt, lock, Application)).one_or_none()

    def _require_app(self, tenant: str, name: str) -> Application:
        row = self._app_row(tenant, name)
        if row is None:
            raise NotFoundError(f"application {tenant}/{name} does not exist")
        return row

    def _agent_row(self, tenant: str, app: str, name: str, *, lock: bool = False) -> Agent | None:
        stmt = (
            select(Agent)
            .join(Application, Agent.app_id == Application.id)
            .join(Tenant, Application.tenant_id == Tenant.id)
            .where(Tenant.name == tenant, Application.name == app, Agent.name == name)
        )
        return self.session.scalars(_locked(stmt, lock, Agent)).one_or_none()


S = TypeVar("S", bound=Select[Any])


def _locked(stmt: S, lock: bool, of: type[Any] | None = None) -> S:
    """`stmt` locking the rows it reads (`of`: only that table's, not the joined parents')
    and refreshing objects the session already holds, when `lock`."""
    if not lock:
        return stmt
    return stmt.with_for_update(of=of).execution_options(populate_existing=True)
