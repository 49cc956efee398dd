"""The report's weight-only entitlement is hierarchical (a parent's share split among its
children present in the report, by weight), over a real SQLite database; at tenant level it
is `weight / Σ weights` as it always was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from control_plane.admin.entitlement import weight_shares
from control_plane.admin.reports import ReportQuery, fairness_report
from storage.db import Database
from storage.records import Level, RequestRecord

START = 1_700_002_800  # a whole hour (UTC)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'arbiter.db'}")
    database.migrate()
    yield database
    database.dispose()


def _serve(db: Database, costs: dict[str, float]) -> None:
    """One ok request per 'tenant/app/agent' key, of that unified cost."""
    rows = [
        RequestRecord(id=f"q{i}", tenant=key.split("/")[0], app=key.split("/")[1],
                      agent=key.split("/")[2], arrival=START + i, status="ok", n_in=1,
                      unified_cost=cost)
        for i, (key, cost) in enumerate(costs.items())
    ]  # fmt: skip
    with db.repos() as r:
        r.requests.insert_many(rows)


def _nodes(db: Database, level: Level, tenant: str | None = None) -> dict[str, Any]:
    query = ReportQuery(START, START + 3600, level, tenant=tenant)
    return {n["key"]: n for n in fairness_report(db, query)["nodes"]}


def _two_tenants(db: Database) -> None:
    """acme (1) with apps x and y (1 each); globex (1) with app z (1) and an idle app (5)."""
    with db.repos() as r:
        for tenant in ("acme", "globex"):
            r.tenants.create_tenant(name=tenant, weight=1.0)
        for tenant, app, weight in (("acme", "x", 1.0), ("acme", "y", 1.0),
                                    ("globex", "z", 1.0), ("globex", "idle", 5.0)):  # fmt: skip
            r.tenants.create_app(tenant=tenant, name=app, weight=weight)
    _serve(db, {"acme/x/default": 10.0, "acme/y/default": 10.0, "globex/z/default": 10.0})


def test_apps_split_their_tenants_share_not_the_pool(db: Database) -> None:
    _two_tenants(db)
    nodes = _nodes(db, "app")
    entitled = {key: n["entitled_share"] for key, n in nodes.items()}
    assert entitled == {"acme/x": 0.25, "acme/y": 0.25, "globex/z": 0.5}  # not 1/3 each
    assert nodes["globex/z"]["path_weights"] == [1.0, 1.0]  # the idle app (5) is not present
    assert nodes["acme/x"]["share_vs_weight"] == pytest.approx((1 / 3) / 0.25)
    assert nodes["globex/z"]["share_vs_weight"] == pytest.approx((1 / 3) / 0.5)
    only_acme = _nodes(db, "app", tenant="acme")
    assert {k: n["entitled_share"] for k, n in only_acme.items()} == {"acme/x": 0.5, "acme/y": 0.5}


def test_tenant_level_is_weight_over_the_reports_weights_as_before(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme", weight=3.0)
        r.tenants.create_tenant(name="globex", weight=0.7)
        r.tenants.create_app(tenant="acme", name="x", weight=9.0)
    _serve(db, {"acme/x/a": 5.0, "acme/y/b": 7.0, "globex/z/c": 11.0, "gone/w/d": 13.0})
    nodes = list(_nodes(db, "tenant").values())
    total = sum(n["weight"] for n in nodes)
    assert [n["weight"] for n in nodes] == [3.0, 0.7, 1.0]  # acme, globex, gone (not configured)
    for n in nodes:  # the old formula, to the last bit
        assert n["entitled_share"] == n["weight"] / total
        assert n["share_vs_weight"] == n["share"] / (n["weight"] / total)
    assert [n["path_weights"] for n in nodes] == [[3.0], [0.7], [1.0]]


def test_agents_split_their_apps_share(db: Database) -> None:
    with db.repos() as r:
        r.tenants.create_tenant(name="acme", weight=2.0)
        r.tenants.create_tenant(name="globex", weight=1.0)
        for tenant, app in (("acme", "x"), ("acme", "y"), ("globex", "z")):
            r.tenants.create_app(tenant=tenant, name=app, weight=1.0)
        for app, agent, weight in (("x", "a", 1.0), ("x", "b", 3.0), ("y", "c", 1.0)):
            r.tenants.create_agent(tenant="acme", app=app, name=agent, weight=weight)
        r.tenants.create_app(tenant="globex", name="w", weight=2.0)
    costs = {"acme/x/a": 1.0, "acme/x/b": 1.0, "acme/y/c": 1.0, "globex/z/d": 1.0}
    _serve(db, {**costs, "globex/w/e": 1.0})  # d and e are not configured: they weigh 1
    nodes = _nodes(db, "agent")
    want = {
        "acme/x/a": 2 / 3 * 1 / 2 * 1 / 4,
        "acme/x/b": 2 / 3 * 1 / 2 * 3 / 4,
        "acme/y/c": 2 / 3 * 1 / 2,
        "globex/z/d": 1 / 3 * 1 / 3,
        "globex/w/e": 1 / 3 * 2 / 3,
    }
    assert {k: n["entitled_share"] for k, n in nodes.items()} == pytest.approx(want)
    assert sum(want.values()) == pytest.approx(1.0)
    assert nodes["globex/w/e"]["path_weights"] == [1.0, 2.0, 1.0]


def test_zero_weights_are_entitled_to_nothing() -> None:
    shares = weight_shares({("a",): [0.0], ("b",): [0.0], ("c", "x"): [1.0, 0.0]})
    assert shares == {("a",): 0.0, ("b",): 0.0, ("c", "x"): 0.0}
