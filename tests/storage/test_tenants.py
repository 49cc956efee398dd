"""Tenants, applications and agents: CRUD, get-or-create, cascades and the hierarchy."""

from __future__ import annotations

import pytest

from storage.db import Database
from storage.errors import AlreadyExistsError, InvalidValueError, NotFoundError


def test_tenant_crud_round_trip(db: Database) -> None:
    with db.repos() as r:
        created = r.tenants.create_tenant(
            name="acme", weight=2.5, priority_tier=1, slo_ttft_ms=500.0, queue_cap=32,
            rate_limit_rps=10.0, token_budget=5_000_000_000,
        )  # fmt: skip
    with db.reader() as r:
        fetched = r.tenants.get_tenant(name="acme")
        assert fetched == created
        assert fetched is not None and fetched.token_budget == 5_000_000_000
        assert r.tenants.get_tenant(name="nobody") is None
    with db.repos() as r:
        updated = r.tenants.update_tenant(
            name="acme", changes={"weight": 4.0, "slo_ttft_ms": None, "priority_tier": 2}
        )
        assert (updated.weight, updated.slo_ttft_ms, updated.priority_tier) == (4.0, None, 2)
        r.tenants.create_tenant(name="beta")
    with db.reader() as r:
        assert [t.name for t in r.tenants.list_tenants()] == ["acme", "beta"]
        assert r.tenants.get_tenant(name="acme") == updated
    with db.repos() as r:
        assert r.tenants.delete_tenant(name="acme") is True
        assert r.tenants.delete_tenant(name="acme") is False
    with db.reader() as r:
        assert [t.name for t in r.tenants.list_tenants()] == ["beta"]


def test_duplicate_names_raise_and_leave_the_transaction_usable(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme")
        with pytest.raises(AlreadyExistsError):
            r.tenants.create_tenant(name="acme")
        r.tenants.create_app(tenant="acme", name="chat")
        with pytest.raises(AlreadyExistsError):
            r.tenants.create_app(tenant="acme", name="chat")
        r.tenants.create_tenant(name="beta")
        r.tenants.create_app(tenant="beta", name="chat")  # same name, other tenant: fine
    with db.reader() as r:
        assert [t.name for t in r.tenants.list_tenants()] == ["acme", "beta"]


def test_invalid_values_are_refused(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme")
        bad_changes: list[dict[str, object]] = [
            {"weight": 0},
            {"weight": -1.0},
            {"weight": float("inf")},
            {"weight": True},
            {"weight": 1e-306},  # cost / weight would be infinite: no checkpoint holds that
            {"weight": 1e7},
            {"priority_tier": -1},
            {"priority_tier": None},
            {"slo_ttft_ms": 0},
            {"queue_cap": 1.5},
            # past the API's range (an OverflowError traceback from `arbiter admin` past the
            # columns' own, stored and served as the API could not before that)
            {"priority_tier": 1001},
            {"priority_tier": 2**64},
            {"queue_cap": 0},
            {"queue_cap": 2**31},
            {"token_budget": 2**63},
            {"slo_ttft_ms": 86_400_001.0},
            {"slo_e2e_ms": float("nan")},
            {"rate_limit_rps": 1e7},
            {"name": "renamed"},
            {"colour": "red"},
        ]
        for changes in bad_changes:
            with pytest.raises(InvalidValueError):
                r.tenants.update_tenant(name="acme", changes=changes)
        for name in ("", "a/b", "x" * 129):
            with pytest.raises(InvalidValueError):
                r.tenants.create_tenant(name=name)
        with pytest.raises(NotFoundError):
            r.tenants.update_tenant(name="nobody", changes={"weight": 2.0})


def test_get_or_create_uses_default_weights_and_is_idempotent(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme", weight=3.0)
        first = r.tenants.get_or_create_agent(tenant="acme", app="chat", name="planner")
        again = r.tenants.get_or_create_agent(tenant="acme", app="chat", name="planner")
        assert first == again
        assert (first.weight, first.priority_tier, first.tenant, first.app) == (
            1.0, None, "acme", "chat",
        )  # fmt: skip
        app = r.tenants.get_or_create_app(tenant="acme", name="chat")
        assert app.id == first.app_id and app.weight == 1.0
        with pytest.raises(NotFoundError):
            r.tenants.get_or_create_app(tenant="nobody", name="chat")
        with pytest.raises(InvalidValueError):
            r.tenants.get_or_create_agent(tenant="acme", app="chat", name="a/b")
    with db.reader() as r:
        assert [a.name for a in r.tenants.list_apps(tenant="acme")] == ["chat"]
        assert [a.name for a in r.tenants.list_agents(tenant="acme", app="chat")] == ["planner"]


def test_apps_and_agents_update_and_delete(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme")
        r.tenants.create_app(tenant="acme", name="chat", weight=2.0, slo_e2e_ms=9000.0)
        r.tenants.create_agent(tenant="acme", app="chat", name="coder", priority_tier=3)
        app = r.tenants.update_app(tenant="acme", name="chat", changes={"weight": 5.0})
        agent = r.tenants.update_agent(
            tenant="acme", app="chat", name="coder", changes={"priority_tier": None}
        )
        assert (app.weight, app.slo_e2e_ms, agent.priority_tier) == (5.0, 9000.0, None)
        with pytest.raises(InvalidValueError):
            r.tenants.update_app(tenant="acme", name="chat", changes={"priority_tier": 1})
        with pytest.raises(NotFoundError):
            r.tenants.update_agent(tenant="acme", app="chat", name="x", changes={})
        with pytest.raises(NotFoundError):
            r.tenants.create_agent(tenant="acme", app="nope", name="x")
        assert r.tenants.delete_agent(tenant="acme", app="chat", name="coder") is True
        assert r.tenants.get_agent(tenant="acme", app="chat", name="coder") is None
        assert r.tenants.delete_app(tenant="acme", name="chat") is True
        assert r.tenants.get_app(tenant="acme", name="chat") is None
        assert r.tenants.delete_app(tenant="acme", name="chat") is False


def test_deleting_a_tenant_cascades_to_apps_agents_and_keys(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme")
        r.tenants.get_or_create_agent(tenant="acme", app="chat", name="planner")
        _, key = r.keys.create(tenant="acme")
    with db.repos() as r:
        r.tenants.delete_tenant(name="acme")
    with db.repos() as r:
        assert r.keys.resolve(plaintext=key) is None
        assert r.keys.list() == []
        r.tenants.create_tenant(name="acme")  # the name is free again, with no children
        assert r.tenants.list_apps(tenant="acme") == []


def test_hierarchy_snapshot(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="b", weight=2.0)
        r.tenants.create_tenant(name="a")
        r.tenants.get_or_create_agent(tenant="a", app="x", name="k2")
        r.tenants.get_or_create_agent(tenant="a", app="x", name="k1")
        r.tenants.get_or_create_agent(tenant="a", app="w", name="k0")
    with db.reader() as r:
        tree = r.tenants.hierarchy()
    assert [node.tenant.name for node in tree] == ["a", "b"]
    assert tree[1].apps == () and tree[1].tenant.weight == 2.0
    assert [app.app.name for app in tree[0].apps] == ["w", "x"]
    assert [agent.name for agent in tree[0].apps[1].agents] == ["k1", "k2"]
    assert {agent.app for agent in tree[0].apps[1].agents} == {"x"}


def test_names_follow_the_api_s_rule_on_every_path(db: Database) -> None:
    """A name the API would refuse (or could not put in a URL) is refused in SQL too, so a
    CLI-made tenant can always be addressed by the API and the console."""
    for name in ("a#b", "a%2Fb", "ops team", "", "x" * 129, "a\n"):
        with pytest.raises(InvalidValueError, match="tenant name"), db.repos() as r:
            r.tenants.create_tenant(name=name)
    with db.repos() as r:
        r.tenants.create_tenant(name="acme-1.eu:prod_2")


def test_values_at_the_api_s_bounds_are_taken(db: Database) -> None:
    top = {"priority_tier": 1000, "queue_cap": 2**31 - 1, "token_budget": 2**63 - 1,
           "slo_ttft_ms": 86_400_000.0, "rate_limit_rps": 1e6}  # fmt: skip
    with db.repos() as r:
        r.tenants.create_tenant(name="acme", **top)  # type: ignore[arg-type]
    with db.reader() as r:
        tenant = r.tenants.get_tenant(name="acme")
    assert tenant is not None
    assert {name: getattr(tenant, name) for name in top} == top
