"""The Kubernetes overlays render with `kubectl kustomize`, pass `kubernetes-validate` against
the Kubernetes schemas, and hang together: every Arbiter command exists, every ARBITER_*
variable is a setting, every probe and Service names a port its pods declare, every ConfigMap
and Secret a pod reads is rendered beside it (or, in prod, created by the operator)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from control_plane.settings import Settings, load_settings
from tests.support.cli_commands import assert_arbiter_command

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = sorted(p.name for p in (ROOT / "kubernetes" / "overlays").iterdir() if p.is_dir())
KUBERNETES_VERSION = "1.30.0"
NOT_SETTINGS = {"ARBITER_CONSOLE_API"}  # read by the console, not by `Settings`
OPERATOR_SECRETS = {"prod": {"arbiter-secrets"}}  # created out of band (see the overlay)
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def _kubectl() -> str:
    """kubectl with kustomize 4 or newer (the overlays use `labels`, `replicas`, targeted
    patches); skipped without one, failed when CI is set."""
    exe = shutil.which("kubectl")
    problem = "kubectl is not installed"
    if exe is not None:
        out = subprocess.run(
            [exe, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=30
        ).stdout
        version = str(json.loads(out or "{}").get("kustomizeVersion", "v0")).lstrip("v")
        if int(version.split(".")[0] or 0) >= 4:
            return exe
        problem = f"kubectl's kustomize is v{version}; the overlays need v4 or newer"
    if os.environ.get("CI"):
        pytest.fail(problem)
    pytest.skip(problem)


@cache
def rendered(overlay: str) -> tuple[dict[str, Any], ...]:
    out = subprocess.run(
        [_kubectl(), "kustomize", str(ROOT / "kubernetes" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return tuple(doc for doc in yaml.safe_load_all(out) if doc)


def _pods(docs: tuple[dict[str, Any], ...]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, pod spec) of every Deployment and StatefulSet."""
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            yield doc, doc["spec"]["template"]["spec"]


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """A pod's containers, its init containers first."""
    return [*spec.get("initContainers", []), *spec["containers"]]


def test_there_is_a_dev_and_a_prod_overlay() -> None:
    assert {"dev", "prod"} <= set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_passes_the_kubernetes_schemas(overlay: str) -> None:
    import kubernetes_validate  # type: ignore[import-untyped]

    kinds = set()
    for doc in rendered(overlay):
        kinds.add(doc["kind"])
        if (doc["apiVersion"], doc["kind"]) in CRDS:
            assert doc["spec"]["endpoints"] and doc["spec"]["selector"], doc
            continue
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert {"Deployment", "StatefulSet", "Service", "HorizontalPodAutoscaler"} <= kinds


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_roles_are_all_there_with_their_replicas(overlay: str) -> None:
    workloads = {d["metadata"]["name"]: d for d, _ in _pods(rendered(overlay))}
    assert {"gateway", "scheduler", "recorder", "console"} <= set(workloads)
    assert workloads["scheduler"]["spec"]["replicas"] == 2  # a leader and a standby
    assert workloads["recorder"]["kind"] == "StatefulSet"  # its name survives a restart
    hpa = next(d for d in rendered(overlay) if d["kind"] == "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "gateway"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_arbiter_variable_is_a_setting(overlay: str) -> None:
    known = {f"ARBITER_{name.upper()}" for name in Settings.model_fields} | NOT_SETTINGS
    names = set()
    for doc in rendered(overlay):
        if doc["kind"] == "ConfigMap":
            names |= set(doc.get("data", {}))
    for _, spec in _pods(rendered(overlay)):
        for container in _containers(spec):
            names |= {e["name"] for e in container.get("env", [])}
    arbiter = {n for n in names if n.startswith("ARBITER_")}
    assert arbiter and arbiter <= known, arbiter - known


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_config_map_passes_the_settings_checks(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a process checks at start (URL schemes, worker list, types) holds for the values
    the overlay ships; secrets' values are the operator's."""
    maps = [doc for doc in rendered(overlay) if doc["kind"] == "ConfigMap"]
    assert maps
    for doc in maps:
        with monkeypatch.context() as env:
            for name, value in doc.get("data", {}).items():
                if name.startswith("ARBITER_"):
                    env.setenv(name, value)
            load_settings()  # raises SettingsError naming the variable


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_probe_and_service_names_a_declared_port(overlay: str) -> None:
    docs = rendered(overlay)
    ports_of: dict[str, set[Any]] = {}
    for workload, spec in _pods(docs):
        label = workload["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
        for container in spec["containers"]:
            declared = {p["name"] for p in container.get("ports", [])}
            declared |= {p["containerPort"] for p in container.get("ports", [])}
            ports_of.setdefault(label, set()).update(declared)
            for probe in ("livenessProbe", "readinessProbe"):
                action = container.get(probe, {})
                port = (action.get("httpGet") or action.get("tcpSocket") or {}).get("port")
                assert port is None or port in declared, (workload["metadata"]["name"], probe)
    for svc in (d for d in docs if d["kind"] == "Service"):
        target = ports_of[svc["spec"]["selector"]["app.kubernetes.io/name"]]
        for port in svc["spec"]["ports"]:
            assert port["targetPort"] in target, (svc["metadata"]["name"], port)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_config_and_secret_a_pod_reads_exists(overlay: str) -> None:
    docs = rendered(overlay)
    present = {(d["kind"], d["metadata"]["name"]) for d in docs}
    outside = OPERATOR_SECRETS.get(overlay, set())
    for workload, spec in _pods(docs):
        for container in _containers(spec):
            refs = [
                ("ConfigMap", s["configMapRef"]["name"])
                for s in container.get("envFrom", [])
                if "configMapRef" in s
            ]
            refs += [
                ("Secret", s["secretRef"]["name"])
                for s in container.get("envFrom", [])
                if "secretRef" in s
            ]
            for env in container.get("env", []):
                source = env.get("valueFrom", {})
                if "secretKeyRef" in source:
                    refs.append(("Secret", source["secretKeyRef"]["name"]))
            for kind, name in refs:
                assert (kind, name) in present or name in outside, (workload["metadata"], name)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_arbiter_command_exists_in_the_cli(overlay: str) -> None:
    for _, spec in _pods(rendered(overlay)):
        for container in _containers(spec):
            if not str(container["image"]).split(":")[0].endswith("arbiter"):
                continue
            if "command" in container:  # the console: streamlit on the shipped app
                assert "/opt/arbiter/console/streamlit_app.py" in container["command"]
                continue
            argv = [str(a) for a in container["args"]]
            assert_arbiter_command(argv)


def _container(docs: tuple[dict[str, Any], ...], name: str) -> dict[str, Any]:
    for workload, spec in _pods(docs):
        if workload["metadata"]["name"] == name:
            return dict(spec["containers"][0]) | {"_pod": spec, "_workload": workload}
    raise AssertionError(f"no workload {name}")


def _env(container: dict[str, Any], name: str) -> str | None:
    return next((e.get("value") for e in container.get("env", []) if e["name"] == name), None)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_stopping_gateway_drains_within_its_grace_period(overlay: str) -> None:
    """SIGTERM comes after preStop (the endpoints stop sending here meanwhile); streams in
    flight then get the drain, then the lifespan stops; all before the kubelet's SIGKILL.
    Regression: uvicorn's drain was a fixed 10 s under a 60 s grace and there was no
    preStop, so rollouts cut every stream longer than 10 s."""
    gateway = _container(rendered(overlay), "gateway")
    drain = int(_env(gateway, "ARBITER_SHUTDOWN_GRACE_S") or Settings().shutdown_grace_s)
    pre_stop = gateway["lifecycle"]["preStop"]["sleep"]["seconds"]
    grace = gateway["_pod"]["terminationGracePeriodSeconds"]
    assert pre_stop >= 3 and drain >= 30
    assert grace >= pre_stop + drain + 5 + 5  # the lifespan's stop, a margin


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_gateways_stay_ready_through_a_leader_takeover(overlay: str) -> None:
    """A gateway holds requests for `no_leader_bound_s` without a leader; readiness must not
    fail sooner, or every replica leaves the Service at once during a takeover."""
    docs = rendered(overlay)
    gateway = _container(docs, "gateway")
    ready = gateway["readinessProbe"]
    assert ready["periodSeconds"] * ready["failureThreshold"] > Settings().no_leader_bound_s()
    for name in ("gateway", "scheduler"):
        container = _container(docs, name)
        for probe in ("livenessProbe", "readinessProbe"):
            assert container[probe].get("timeoutSeconds", 1) >= 3, (name, probe)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_autoscaler_alone_sets_the_gateway_count(overlay: str) -> None:
    """Regression: `replicas` beside the HPA reset the count at every apply."""
    assert "replicas" not in _container(rendered(overlay), "gateway")["_workload"]["spec"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_recorder_has_time_to_migrate(overlay: str) -> None:
    startup = _container(rendered(overlay), "recorder")["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300


def test_one_dev_gateway_does_not_block_a_node_drain() -> None:
    pdb = next(
        d
        for d in rendered("dev")
        if d["kind"] == "PodDisruptionBudget" and d["metadata"]["name"] == "gateway"
    )
    assert pdb["spec"] == {**pdb["spec"], "maxUnavailable": 1} and "minAvailable" not in pdb["spec"]


def _mib(quantity: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "kb": 1 / 1024, "mb": 1, "gb": 1024}
    for unit, factor in units.items():
        if quantity.lower().endswith(unit.lower()):
            return float(quantity[: -len(unit)]) * factor
    return float(quantity) / 2**20


def test_the_dev_redis_refuses_writes_before_its_container_is_killed() -> None:
    redis = _container(rendered("dev"), "redis")
    args = [str(a) for a in redis["args"]]
    maxmemory = _mib(args[args.index("--maxmemory") + 1])
    limit = _mib(redis["resources"]["limits"]["memory"])
    assert 0 < maxmemory <= 0.8 * limit  # headroom for the AOF rewrite's fork and buffers
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"  # never drop state
    assert _env(redis, "MALLOC_CONF") == _env(redis, "JE_MALLOC_CONF") is not None


def _source(container: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((e for e in container.get("env", []) if e["name"] == name), None)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_new_gateway_starts_only_after_the_database_is_migrated(overlay: str) -> None:
    """Gateways never migrate: each gateway pod first runs `arbiter migrate`, from the same
    image, against the database the gateway will use."""
    gateway = _container(rendered(overlay), "gateway")
    (step,) = gateway["_pod"]["initContainers"]
    assert step["args"] == ["migrate"] and step["image"] == gateway["image"]
    database = _source(gateway, "ARBITER_DATABASE_URL")
    assert database is not None and _source(step, "ARBITER_DATABASE_URL") == database
    assert step["securityContext"] == gateway["securityContext"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_roles_that_use_sql_get_the_database_url(overlay: str) -> None:
    docs = rendered(overlay)
    for name in ("gateway", "recorder"):
        assert _source(_container(docs, name), "ARBITER_DATABASE_URL") is not None, name
    assert _source(_container(docs, "scheduler"), "ARBITER_DATABASE_URL") is None


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_role_that_talks_to_redis_gets_its_url(overlay: str) -> None:
    """Dev names its in-cluster Redis in the ConfigMap; prod reads the URL, which carries the
    password of a managed Redis, from the operator's Secret only (required: a missing key
    stops the pod instead of a fallback to some other Redis)."""
    docs = rendered(overlay)
    (config,) = [
        d for d in docs if d["kind"] == "ConfigMap" and "arbiter-config" in d["metadata"]["name"]
    ]
    in_config = config.get("data", {}).get("ARBITER_REDIS_URL")
    for name in ("gateway", "scheduler", "recorder"):
        source = _source(_container(docs, name), "ARBITER_REDIS_URL")
        if overlay == "prod":
            assert in_config is None
            assert source is not None, name
            ref = source["valueFrom"]["secretKeyRef"]
            assert (ref["name"], ref["key"]) == ("arbiter-secrets", "redis-url")
            assert not ref.get("optional", False), name
        else:
            assert source is None and in_config == "redis://redis:6379/0", name


def test_the_service_monitor_s_credentials_are_ones_the_gateways_require() -> None:
    """Regression: the ServiceMonitor scraped with `metrics-token` while the gateways read it
    as optional — without the key, gateways served /metrics to anyone and Prometheus could not
    read its credentials."""
    docs = rendered("prod")
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    gateway = _container(docs, "gateway")
    refs = {
        (e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
        for e in gateway["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
        and not e["valueFrom"]["secretKeyRef"].get("optional", False)
    }
    used = [
        (c["name"], c["key"])
        for endpoint in monitor["spec"]["endpoints"]
        if (c := endpoint.get("authorization", {}).get("credentials"))
    ]
    assert used and set(used) <= refs
