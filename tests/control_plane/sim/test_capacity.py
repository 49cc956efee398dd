"""Capacity measurement used to calibrate scenarios."""

from __future__ import annotations

import pytest

from control_plane.sim.capacity import measure_capacity, pool_loads
from control_plane.sim.cluster import build_workers
from control_plane.sim.workload import build_workload
from tests.control_plane.sim.builders import tiny


def test_capacity_grows_with_shorter_requests_and_rho_is_offered_over_capacity() -> None:
    scenario = tiny()
    short = measure_capacity(build_workers(scenario)[0].engine, [(100, 20)], 60.0, 10.0)
    long = measure_capacity(build_workers(scenario)[0].engine, [(2000, 200)], 60.0, 10.0)
    assert short[0] > 5 * long[0] > 0
    assert short[1] == pytest.approx(20 * short[0], rel=0.1)
    (load,) = pool_loads(scenario, horizon_s=60.0)
    assert load.model == "llama3-8b" and load.workers == 1
    assert load.offered_rps == pytest.approx(len(build_workload(scenario)) / scenario.duration_s)
    assert load.rho == pytest.approx(load.offered_rps / load.capacity_rps)
