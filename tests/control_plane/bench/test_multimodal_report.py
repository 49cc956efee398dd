"""The bench's measures: service in the contended window, shares, the HMFS claims, the
breakdown per tenant and model, and the agreement of two sides' shares."""

from __future__ import annotations

import pytest

from control_plane.bench.multimodal_report import (
    agreement,
    by_model,
    claims,
    raw_token_shares,
    shares,
    window_service,
)
from control_plane.core.job import Slo
from control_plane.sim.records import RequestRecord


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


def test_the_breakdown_says_which_model_a_share_comes_from() -> None:
    text = record("acme", "helper", 300, 300, 1.0, 1.0)
    image = record("artist", "gallery", 50, 28, 1152.0, 2.0)
    late = record("artist", "gallery", 50, 28, 1152.0, 20.0)
    image.model = late.model = "sd3-medium"
    rows = {(r["tenant"], r["model"]): r for r in by_model([text, image, late], 10.0)}
    art = rows[("artist", "sd3-medium")]
    assert (art["arrived"], art["dispatched"], art["finished"]) == (1, 1, 1)
    assert art["service"] == pytest.approx(1152 * (50 + 2 * 28))
    assert art["share"] + rows[("acme", "m")]["share"] == pytest.approx(1.0)
    assert art["statuses"] == {"ok": 2} and art["queue_mean_s"] == 0.0


def test_agreement_is_relative_to_the_simulated_share() -> None:
    a = [record("a", "x", 100, 0, 1.0, 1.0), record("b", "x", 100, 0, 1.0, 1.0)]
    b = [record("a", "x", 108, 0, 1.0, 1.0), record("b", "x", 92, 0, 1.0, 1.0)]
    rows = {r["tenant"]: r for r in agreement(b, a, 10.0, 0.1)}
    assert rows["a"]["relative"] == pytest.approx(0.08) and rows["a"]["agrees"]
    rows = {r["tenant"]: r for r in agreement(b, a, 10.0, 0.05)}
    assert not rows["a"]["agrees"] and not rows["b"]["agrees"]
