"""A live replay writes the scenario's SLO targets into tenant records (headers can only relax
them): one target per tenant and field, in ms divided by the replay speed."""

from __future__ import annotations

from control_plane.core.job import Slo
from control_plane.sim.live_bench import request_headers
from control_plane.sim.live_slo import tenant_slos
from control_plane.sim.workload import RequestSpec


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
