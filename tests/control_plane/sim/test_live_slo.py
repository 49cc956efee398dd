"""A live replay writes the scenario's SLO targets into tenant records (headers can only relax
them): one target per tenant and field, in ms divided by the replay speed."""

from __future__ import annotations

from pathlib import Path

import pytest

from control_plane.admin import tenancy
from control_plane.api.app import create_app
from control_plane.core.job import Slo
from control_plane.settings import Settings
from control_plane.sim.live_bench import request_headers
from control_plane.sim.live_slo import tenant_slos, write_tenant_slos
from control_plane.sim.workload import RequestSpec
from storage.db import Database
from tests.control_plane.api.admin.served import served


def spec(i: int, tenant: str, slo: Slo) -> RequestSpec:
    return RequestSpec(f"r{i}", float(i), tenant, "app", "agent", "m", None, None, 8, 4, slo, 0)


def test_one_target_per_tenant_and_field_divided_by_speed() -> None:
    specs = [
        spec(0, "a", Slo(ttft_s=2.0, e2e_s=20.0)),
        spec(1, "a", Slo(ttft_s=2.0, e2e_s=20.0)),
        spec(2, "b", Slo(e2e_s=30.0)),
        spec(3, "c", Slo()),
    ]

    records, notes = tenant_slos(specs, speed=4.0)

    assert records == {
        "a": {"slo_ttft_ms": 500.0, "slo_e2e_ms": 5000.0},
        "b": {"slo_e2e_ms": 7500.0},
    }
    assert notes == []
    # the headers carry the same numbers, so they relax nothing
    headers = request_headers(specs[0], "k", 4.0)
    assert headers["X-Arbiter-SLO-TTFT-Ms"] == "500" and headers["X-Arbiter-SLO-E2E-Ms"] == "5000"


def test_a_tenant_with_mixed_targets_gets_no_record_for_that_field() -> None:
    specs = [spec(0, "a", Slo(ttft_s=1.0, e2e_s=9.0)), spec(1, "a", Slo(ttft_s=3.0, e2e_s=9.0))]

    records, notes = tenant_slos(specs, speed=1.0)

    assert records == {"a": {"slo_e2e_ms": 9000.0}}
    assert notes == ["a: requests differ in slo_ttft_ms; no record written"]


async def test_slo_records_are_written_for_every_tenant_or_none(
    redis_url: str, tmp_path: Path
) -> None:
    """Regression: tenants were patched one by one, so a tenant the gateway did not have failed
    the replay after the SLO records of the tenants before it had changed."""
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    db.migrate()
    tenancy.create_node(db, ("a",), {"slo_ttft_ms": 900.0}, actor="t", reason="r")
    settings = Settings(redis_url=redis_url, database_url=db.url, admin_token="adm")
    records = {"a": {"slo_ttft_ms": 100.0}, "b": {"slo_ttft_ms": 100.0}}
    try:
        with served(create_app(settings, db=db)) as url:
            with pytest.raises(RuntimeError, match="no tenant 'b'"):
                await write_tenant_slos(url, "adm", records)
            assert tenancy.get_node(db, ("a",)).slo_ttft_ms == 900.0
            await write_tenant_slos(url, "adm", {"a": records["a"]})
            assert tenancy.get_node(db, ("a",)).slo_ttft_ms == 100.0
    finally:
        db.dispose()
