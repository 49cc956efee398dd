"""Reports equal totals computed straight from the request rows; CSV and HTML downloads; service
per model kind; a report over pruned minute rollups widens its edges there to the hour."""

from __future__ import annotations

import csv
import io
import math
import random
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest

from storage.records import RequestRecord
from storage.retention import prune_minute_rollups
from tests.control_plane.api.admin.conftest import AdminApi

START = 1_700_002_800  # a whole hour (UTC)
SPAN = 2 * 3600
STATUSES = ("ok", "ok", "ok", "ok", "error", "timeout", "withdrawn")
TENANT_WEIGHTS = {"acme": 3.0, "globex": 2.0}  # `loaded`'s; apps and agents are not configured


def make_rows(n: int = 400, seed: int = 7) -> list[RequestRecord]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        tenant = rng.choice(["acme", "acme", "globex", "initech"])
        n_in, n_out = rng.randint(10, 2000), rng.randint(1, 500)
        status = rng.choice(STATUSES)
        rows.append(
            RequestRecord(
                id=f"q{i}",
                tenant=tenant,
                app=rng.choice(["chat", "docs"]),
                agent=rng.choice(["planner", "writer", "default"]),
                arrival=START + rng.uniform(0, SPAN - 1),
                status=status,  # type: ignore[arg-type]
                n_in=n_in,
                n_out=n_out,
                unified_cost=(n_in + 2 * n_out) * (1.5 if tenant == "globex" else 1.0),
                slo_violated=rng.random() < 0.3,
                ttft_ms=rng.uniform(5, 900) if status == "ok" else None,
                e2e_ms=rng.uniform(100, 20_000) if status != "withdrawn" else None,
                tpot_ms=rng.uniform(5, 80) if status == "ok" else None,
            )
        )
    return rows


def entitled(keys: set[str]) -> dict[str, float]:
    """Hierarchical weight-only entitlement when only tenants have weights (others weigh 1):
    the tenant's part of the present tenants', split evenly among present children below."""
    paths = [tuple(k.split("/")) for k in keys]
    total = sum(TENANT_WEIGHTS.get(t, 1.0) for t in {p[0] for p in paths})
    out = {}
    for p in paths:
        share = TENANT_WEIGHTS.get(p[0], 1.0) / total
        for depth in range(1, len(p)):
            share /= len({q[: depth + 1] for q in paths if q[:depth] == p[:depth]})
        out["/".join(p)] = share
    return out


def expected(rows: list[RequestRecord], level: str) -> dict[str, Any]:
    depth = {"tenant": 1, "app": 2, "agent": 3}[level]
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    e2e: dict[str, list[float]] = defaultdict(list)
    for rec in rows:
        key = "/".join((rec.tenant, rec.app, rec.agent)[:depth])
        node = acc[key]
        node["requests"] += 1
        node["n_in"] += rec.n_in
        node["n_out"] += rec.n_out
        node["service"] += rec.unified_cost
        node["finished"] += rec.status != "withdrawn"
        node["violations"] += rec.slo_violated and rec.status != "withdrawn"
        if rec.e2e_ms is not None:
            e2e[key].append(rec.e2e_ms)
    total = sum(n["service"] for n in acc.values())
    peak = max(n["service"] for n in acc.values())
    entitled_share = entitled(set(acc))
    out = {}
    for key, n in acc.items():
        rate = n["violations"] / n["finished"] if n["finished"] else 0.0
        values = sorted(e2e[key])
        out[key] = {
            **n,
            "violation_rate": rate,
            "share": n["service"] / total,
            "entitled_share": entitled_share[key],
            "safi": 0.7 * rate + 0.3 * n["service"] / peak,
            "e2e_p50": values[math.ceil(0.5 * len(values)) - 1],
        }
    return out


@pytest.fixture
async def loaded(api_any_db: AdminApi) -> AdminApi:
    api = api_any_db
    await api.client.post("/admin/tenants", json={"name": "acme", "weight": 3, "reason": "r"})
    await api.client.post("/admin/tenants", json={"name": "globex", "weight": 2, "reason": "r"})
    with api.db.repos() as r:
        r.requests.insert_many(make_rows())
    return api


@pytest.mark.parametrize("level", ["tenant", "app", "agent"])
async def test_report_equals_totals_from_rows(loaded: AdminApi, level: str) -> None:
    iso_to = datetime.fromtimestamp(START + SPAN, UTC).isoformat()
    resp = await loaded.client.get(
        "/admin/reports", params={"from": START, "to": iso_to, "level": level}
    )
    assert resp.status_code == 200, resp.text
    report = resp.json()
    weights = TENANT_WEIGHTS if level == "tenant" else {}
    want = expected(make_rows(), level)
    got = {n["key"]: n for n in report["nodes"]}
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        assert (g["requests"], g["n_in"], g["n_out"]) == (w["requests"], w["n_in"], w["n_out"])
        assert g["violations"] == w["violations"]
        assert g["ok"] + g["failed"] == w["finished"]
        for name in ("violation_rate", "share", "entitled_share", "safi"):
            assert g[name] == pytest.approx(w[name]), (key, name)
        assert g["unified_service"] == pytest.approx(w["service"])
        assert g["share_vs_weight"] == pytest.approx(w["share"] / w["entitled_share"])
        assert g["e2e_ms"]["p50"] == pytest.approx(w["e2e_p50"], rel=0.02)  # rollup sketch
    service = [w["service"] / weights.get(k, 1.0) for k, w in want.items()]
    jain = sum(service) ** 2 / (len(service) * sum(s * s for s in service))
    assert report["jain_service"] == pytest.approx(jain)
    assert report["source"] == "rollups" and report["step"] == 60
    assert len(report["series"]) == SPAN // 60


async def test_rollups_and_rows_agree_and_series_sum(loaded: AdminApi) -> None:
    params: dict[str, Any] = {"from": START, "to": START + SPAN, "level": "app", "step": 3600}
    fast = (await loaded.client.get("/admin/reports", params=params)).json()
    exact = (
        await loaded.client.get("/admin/reports", params={**params, "source": "requests"})
    ).json()
    assert exact.get("source") == "requests", exact
    for a, b in zip(fast["nodes"], exact["nodes"], strict=True):
        assert (a["key"], a["requests"], a["violations"]) == (
            b["key"],
            b["requests"],
            b["violations"],
        )
        assert a["unified_service"] == pytest.approx(b["unified_service"])
    assert [p["start"] for p in fast["series"]] == [START, START + 3600]
    for node in fast["nodes"]:
        in_series = sum(p["service"][node["key"]] for p in fast["series"])
        assert in_series == pytest.approx(node["unified_service"])


async def test_csv_download_matches_json(loaded: AdminApi) -> None:
    params: dict[str, Any] = {"from": START, "to": START + SPAN, "level": "tenant"}
    report = (await loaded.client.get("/admin/reports", params=params)).json()
    resp = await loaded.client.get("/admin/reports", params={**params, "format": "csv"})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/csv")
    assert "attachment" in resp.headers["content-disposition"]
    lines = list(csv.DictReader(io.StringIO(resp.text)))
    assert [row["node"] for row in lines] == [n["key"] for n in report["nodes"]]
    for row, node in zip(lines, report["nodes"], strict=True):
        assert int(row["requests"]) == node["requests"]
        assert float(row["unified_service"]) == pytest.approx(node["unified_service"])
        assert float(row["safi"]) == pytest.approx(node["safi"])
        assert float(row["e2e_p99_ms"]) == pytest.approx(node["e2e_ms"]["p99"])
    html = await loaded.client.get("/admin/reports", params={**params, "format": "html"})
    assert html.status_code == 200 and "Jain" in html.text and "acme" in html.text


async def test_report_parameters_are_checked(api: AdminApi) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"from": "yesterday"}, "from"),
        ({"from": 100, "to": 50}, "from"),
        ({"level": "planet"}, "level"),
        ({"format": "xml"}, "format"),
        ({"step": 7}, "step"),
    ]
    for params, param in cases:
        resp = await api.client.get("/admin/reports", params=params)
        assert resp.status_code == 422, params
        assert resp.json()["error"]["param"] == param, resp.json()
    empty = (await api.client.get("/admin/reports")).json()
    assert empty["nodes"] == [] and empty["jain_service"] == 1.0


@pytest.mark.parametrize("source", ["rollups", "requests"])
async def test_a_period_too_long_for_its_step_is_refused_at_once(
    api: AdminApi, source: str
) -> None:
    """3,000 years by minutes (1.6e9 windows) once built every point on a worker thread the
    gateway shares; a date past the epoch bound was a 500."""
    params = {"from": 0, "to": 100_000_000_000, "step": 60, "source": source}
    resp = await api.client.get("/admin/reports", params=params)
    assert resp.status_code == 422 and "windows" in resp.json()["error"]["message"]
    far = await api.client.get("/admin/reports", params={"to": "9999-12-31T23:59:59-14:00"})
    assert far.status_code == 422 and far.json()["error"]["param"] == "to"
    week = {"from": 0, "to": 7 * 86400, "step": 60, "source": source}
    assert (await api.client.get("/admin/reports", params=week)).status_code == 200


async def test_a_report_over_pruned_minutes_says_its_widened_range(loaded: AdminApi) -> None:
    """After `prune-history --minute-rollups-older-than-days`: an edge before the horizon is
    widened to the hour (`from` says so), the default series is hourly there, a minute step is
    refused, and the totals are those of the rows in the widened range."""
    prune_minute_rollups(loaded.db, before=START + 3600 + 900, now=START + 10 * 86_400)
    params: dict[str, Any] = {"from": START + 600, "to": START + SPAN - 590, "level": "tenant"}
    resp = await loaded.client.get("/admin/reports", params=params)
    assert resp.status_code == 200, resp.text
    report = resp.json()
    assert (report["start"], report["end"], report["step"]) == (START, START + SPAN - 540, 3600)
    assert report["from"] == datetime.fromtimestamp(START, UTC).isoformat().replace("+00:00", "Z")
    rows = [rec for rec in make_rows() if rec.arrival < START + SPAN - 540]
    want = {key: w["requests"] for key, w in expected(rows, "tenant").items()}
    assert {n["key"]: n["requests"] for n in report["nodes"]} == want
    refused = await loaded.client.get("/admin/reports", params={**params, "step": 60})
    assert refused.status_code == 422 and "were pruned" in refused.json()["error"]["message"]


KIND_ROWS = [
    # (tenant, model, n_in, n_out, unified_cost, seconds after START, status)
    ("acme", "llama", 100, 10, 120.0, 10, "ok"),
    ("acme", "llama", 50, 5, 60.0, 20, "timeout"),
    ("acme", "llava", 400, 20, 900.0, 30, "ok"),
    ("acme", "mystery", 30, 3, 20.0, 40, "ok"),  # not in the registry: llm
    ("globex", "llama", 70, 7, 100.0, 50, "ok"),
    ("globex", "llava", 200, 10, 300.0, 60, "withdrawn"),
    ("globex", "llava", 999, 99, 5_000.0, -1, "ok"),  # before 'from'
    ("acme", "llama", 999, 99, 7_000.0, 3600, "ok"),  # at 'to': outside [from, to)
]


async def test_service_by_kind_sums_and_shares(api_any_db: AdminApi) -> None:
    api = api_any_db
    for name, kind in (("llama", "llm"), ("llava", "vlm")):
        spec = {"kind": kind, "hidden_size": 4096, "num_layers": 32, "reason": "r"}
        assert (await api.client.put(f"/admin/models/{name}", json=spec)).status_code == 200
    rows = [
        RequestRecord(
            id=f"k{i}", tenant=t, app="chat", agent="a", model=m, n_in=n_in, n_out=n_out,
            unified_cost=cost, arrival=START + dt, status=status,  # type: ignore[arg-type]
        )
        for i, (t, m, n_in, n_out, cost, dt, status) in enumerate(KIND_ROWS)
    ]  # fmt: skip
    with api.db.repos() as r:
        r.requests.insert_many(rows)
    iso_from = datetime.fromtimestamp(START, UTC).isoformat()
    params: dict[str, Any] = {"from": iso_from, "to": START + 3600}
    resp = await api.client.get("/admin/reports/service-by-kind", params=params)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["start"], body["end"]) == (START, START + 3600)
    assert body["kinds"] == ["llm", "vlm"] and body["tenants"] == ["acme", "globex"]
    got = {(d["tenant"], d["kind"]): d for d in body["data"]}
    assert set(got) == {("acme", "llm"), ("acme", "vlm"), ("globex", "llm"), ("globex", "vlm")}
    acme_llm = got["acme", "llm"]
    assert (acme_llm["requests"], acme_llm["n_in"], acme_llm["n_out"]) == (3, 180, 18)
    assert acme_llm["unified_service"] == pytest.approx(200.0)
    assert acme_llm["share"] == pytest.approx(200.0 / 300.0)
    assert got["globex", "vlm"]["share"] == pytest.approx(300.0 / 1200.0)
    for kind in body["kinds"]:
        assert sum(d["share"] for d in body["data"] if d["kind"] == kind) == pytest.approx(1.0)
    totals = {t["kind"]: t for t in body["totals"]}
    assert totals["llm"]["requests"] == 4 and totals["llm"]["unified_service"] == pytest.approx(300)
    assert (totals["vlm"]["n_in"], totals["vlm"]["n_out"]) == (600, 30)


async def test_service_by_kind_parameters_are_checked(api: AdminApi) -> None:
    for params, param in (({"from": "yesterday"}, "from"), ({"from": 100, "to": 50}, "from")):
        resp = await api.client.get("/admin/reports/service-by-kind", params=params)
        assert resp.status_code == 422, params
        assert resp.json()["error"]["param"] == param, resp.json()
    empty = (await api.client.get("/admin/reports/service-by-kind")).json()
    assert empty["data"] == [] and empty["kinds"] == [] and empty["totals"] == []
    assert empty["end"] - empty["start"] == pytest.approx(86400.0)
    refused = await api.client.get(
        "/admin/reports/service-by-kind", headers={"Authorization": "Bearer wrong"}
    )
    assert refused.status_code == 401 and "error" in refused.json()
