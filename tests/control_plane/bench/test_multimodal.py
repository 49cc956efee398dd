"""`arbiter bench hmfs-multimodal`'s arithmetic: service in the contended window, shares, the
HMFS claims, and the registry record it writes for each profile's model."""

from __future__ import annotations

import pytest

from control_plane.bench.multimodal import (
    claims,
    exact_image_caps,
    model_spec,
    raw_token_shares,
    shares,
    window_service,
)
from control_plane.core.job import Slo
from control_plane.sim.live_shapes import model_infos
from control_plane.sim.records import RequestRecord
from control_plane.sim.scenario import load_scenario
from control_plane.sim.workload import build_workload


def record(tenant: str, app: str, n_in: int, n_out: int, factor: float, t: float) -> RequestRecord:
    r = RequestRecord(f"{tenant}-{t}", tenant, app, "g", "m", None, t, n_in, n_out, Slo(), factor)
    r.dispatched, r.first_token, r.finished, r.n_out, r.status = t, t, t + 1.0, n_out, "ok"
    return r


def test_window_service_counts_only_what_was_served_inside_it() -> None:
    inside = record("acme", "helper", 10, 5, 1.0, 1.0)
    straddling = record("acme", "helper", 10, 4, 1.0, 9.5)  # output spread over 9.5 .. 10.5
    late = record("art", "gallery", 50, 28, 1152.0, 20.0)
    got = window_service([inside, straddling, late], 10.0)
    assert got["acme"] == pytest.approx(20 + 10 + 2 * 4 / 2)
    assert got["art"] == 0.0
    assert shares({"a": 1.0, "b": 3.0}) == {"a": 0.25, "b": 0.75}
    assert shares({"a": 0.0}) == {"a": 0.0}


def test_unified_shares_differ_from_raw_token_shares_for_images() -> None:
    text = record("acme", "helper", 300, 300, 1.0, 1.0)
    image = record("artist", "gallery", 50, 28, 1152.0, 1.0)
    raw = raw_token_shares([text, image])
    unified = shares(window_service([text, image], 5.0))
    assert raw["artist"] == pytest.approx(78 / 678)
    assert unified["artist"] > 0.99


def test_claims_compare_helper_and_swarm_inside_acme() -> None:
    helper = [record("acme", "helper", 10, 10, 1.0, float(t)) for t in range(5)]
    swarm = [record("acme", "swarm", 10, 10, 1.0, float(t)) for t in range(5)]
    for r in swarm[2:]:  # three of swarm's requests never served
        r.dispatched = r.first_token = r.finished = None
        r.n_out, r.status = 0, "timeout"
    got = claims(helper + swarm, 100.0)
    assert got["helper_served_over_demand"] == pytest.approx(1.0)
    assert got["swarm_served_over_demand"] == pytest.approx(0.4)
    assert got["helper_share_of_acme"] == pytest.approx(5 / 7)


def test_the_registry_record_carries_the_scenarios_override_and_rules() -> None:
    scenario = load_scenario("hmfs-multimodal")
    by_name = {scenario.profile(g).model.name: scenario.profile(g) for g in scenario.cluster}
    image = model_spec(by_name["sd3-medium"], scenario)
    assert image["kind"] == "image" and image["unified_cost_factor"] == 1152
    assert image["generation"]["steps"] == 28
    vlm = model_spec(by_name["qwen2-vl-7b"], scenario)
    assert vlm["unified_cost_factor"] is None and vlm["image_tokens"]["kind"] == "patch_merge"


def test_image_jobs_get_their_exact_cap_on_both_sides() -> None:
    scenario = load_scenario("hmfs-multimodal").with_overrides(None, 30)
    specs = exact_image_caps(build_workload(scenario), model_infos(scenario))
    images = [s for s in specs if s.model == "sd3-medium"]
    assert images and all(s.cap == s.n_out == 28 for s in images)
    assert all(s.cap > 28 for s in specs if s.model == "llama3-8b")
