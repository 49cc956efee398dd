"""The Prometheus config scrapes every Arbiter process compose runs; the Grafana dashboard is
well formed, provisioned, and every panel queries a metric Arbiter exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from prometheus_client import CollectorRegistry

from control_plane.gateway.metrics import GatewayMetrics
from control_plane.recorder.metrics import RecorderMetrics
from control_plane.scheduler.metrics import SchedulerMetrics

DOCKER = Path(__file__).resolve().parents[2] / "docker"
DASHBOARD = DOCKER / "grafana" / "dashboards" / "arbiter.json"

# The parts of Grafana's dashboard model (schemaVersion 39) that provisioning and rendering
# rely on; Grafana ignores a dashboard without them or with panels it cannot place.
PANEL = {
    "type": "object",
    "required": ["id", "type", "title", "gridPos", "targets", "datasource"],
    "properties": {
        "id": {"type": "integer"},
        "type": {"enum": ["timeseries", "table", "stat", "gauge", "bargauge"]},
        "title": {"type": "string", "minLength": 1},
        "gridPos": {
            "type": "object",
            "required": ["h", "w", "x", "y"],
            "properties": {
                "h": {"type": "integer", "minimum": 1},
                "w": {"type": "integer", "minimum": 1, "maximum": 24},
                "x": {"type": "integer", "minimum": 0, "maximum": 23},
                "y": {"type": "integer", "minimum": 0},
            },
        },
        "datasource": {"type": "object", "required": ["type", "uid"]},
        "targets": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["refId", "expr"],
                "properties": {"expr": {"type": "string", "minLength": 1}},
            },
        },
    },
}
DASHBOARD_SCHEMA = {
    "type": "object",
    "required": ["uid", "title", "schemaVersion", "panels", "templating", "time"],
    "properties": {
        "uid": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,40}$"},
        "title": {"type": "string", "minLength": 1},
        "schemaVersion": {"type": "integer", "minimum": 36},
        "panels": {"type": "array", "minItems": 1, "items": PANEL},
        "templating": {
            "type": "object",
            "required": ["list"],
            "properties": {"list": {"type": "array", "items": {"required": ["name", "type"]}}},
        },
        "time": {"type": "object", "required": ["from", "to"]},
    },
}
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum")}


def _exported() -> set[str]:
    """Every series name Arbiter's registries can expose (families with their suffixes)."""
    registries: list[CollectorRegistry] = [
        SchedulerMetrics().registry,
        GatewayMetrics().registry,
        RecorderMetrics().registry,
    ]
    names: set[str] = set()
    for registry in registries:
        for family in registry.collect():
            names.add(family.name)
            names.update(family.name + s for s in SUFFIXES.get(family.type, ()))
            if family.type == "info":
                names.add(family.name + "_info")
    return names


def _dashboard() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text())
    assert isinstance(data, dict)
    return data


def test_the_dashboard_follows_grafanas_model() -> None:
    dashboard = _dashboard()
    jsonschema.validate(dashboard, DASHBOARD_SCHEMA)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            used = set(re.findall(r"\$(\w+)", target["expr"]))
            assert used <= variables, (panel["title"], used)


def test_every_panel_queries_an_exported_metric() -> None:
    exported = _exported()
    assert "arbiter_node_safi" in exported and "arbiter_policy_info" in exported
    queried = set()
    for panel in _dashboard()["panels"]:
        for target in panel["targets"]:
            names = set(re.findall(r"\barbiter_[a-z_]+", target["expr"]))
            assert names, (panel["title"], target["expr"])
            assert names <= exported, (panel["title"], names - exported)
            queried |= names
    fairness = {
        "arbiter_node_" + g
        for g in (
            "safi",
            "credit",
            "virtual_counter",
            "queued",
            "oldest_wait_seconds",
            "service_rate",
            "slo_attainment",
        )
    }
    assert fairness <= queried
    controller = {"arbiter_controller_" + g for g in ("active", "view", "limit", "switches_total")}
    assert controller | {"arbiter_gateway_rejected_total"} <= queried


def test_no_two_panels_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in _dashboard()["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


def test_grafana_is_provisioned_with_the_dashboard_and_prometheus() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]
    grafana, prometheus = compose["grafana"], compose["prometheus"]
    mounts = {v.split(":")[1]: DOCKER / v.split(":")[0] for v in grafana["volumes"]}
    provider = yaml.safe_load(
        (mounts["/etc/grafana/provisioning"] / "dashboards" / "arbiter.yaml").read_text()
    )
    path = provider["providers"][0]["options"]["path"]
    assert (mounts[path] / DASHBOARD.name).is_file()
    sources = yaml.safe_load(
        (mounts["/etc/grafana/provisioning"] / "datasources" / "prometheus.yaml").read_text()
    )
    (source,) = sources["datasources"]
    uids = {p["datasource"]["uid"] for p in _dashboard()["panels"]}
    assert uids == {source["uid"]}
    assert source["url"] == "http://prometheus:9090"
    assert any(v.endswith("/etc/prometheus/prometheus.yml:ro") for v in prometheus["volumes"])


def test_prometheus_scrapes_every_arbiter_process_on_its_port() -> None:
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())["services"]
    config = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    targets = {
        t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]
    }
    expected = set()
    for name, svc in compose.items():
        command = [str(c) for c in svc.get("command", [])]
        if svc.get("image") != "arbiter:latest" or not command:
            continue
        if command[0] in ("gateway", "scheduler"):
            expected.add(f"{name}:{command[command.index('--port') + 1]}")
        elif command[0] == "recorder":
            expected.add(f"{name}:{svc['environment']['ARBITER_RECORDER_METRICS_PORT']}")
    assert expected and targets == expected
