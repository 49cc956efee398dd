"""`arbiter bench hmfs-multimodal`: the HMFS multi-modal scenario live, beside its simulation.

The live side is a real `arbiter up` (gateway, scheduler running the policy, recorder, SQLite)
whose pool is the scenario's cluster as simulated workers of the three kinds (an LLM, a VLM and
an image model, all at `--speed`), the models registered through the admin API with the
scenario's Unified Token overrides (the registry's factors are then the simulator's). Every
request is sent in its kind's shape (`control_plane.sim.live_shapes`: token-id prompts, chat
with real 448×448 images, image generations) by the OpenAI API at its arrival time. The
simulated side runs the same request list through the same policy objects on a virtual clock
with the live stack's constants (`Scenario.as_live`). Measured over the contended window, the
arrivals' `[0, duration]` (afterwards the drain serves every backlog in full, so whole-run
totals only restate demand): each tenant's share of the unified service, live vs simulated
(they agree when within `tolerance`, relative); the HMFS claims live and simulated (the
single-agent app `acme/helper` receives what it asks for while the ten-agent `acme/swarm`
gets the rest of acme's share; the image tenant's share of service far exceeds its share of
raw tokens: it is charged by unified cost); and the recorder's own per-kind totals from SQL.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from control_plane.bench.up_process import UpConfig, UpProcess, free_port
from control_plane.core.unified import unified_cost
from control_plane.sim.cluster import unit_factors
from control_plane.sim.live_bench import LiveTarget, replay
from control_plane.sim.live_shapes import model_infos
from control_plane.sim.records import RequestRecord
from control_plane.sim.runner import run_policy
from control_plane.sim.scenario import Scenario, load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.timeseries import service_cumulative
from control_plane.sim.workload import RequestSpec, build_workload
from workers.engine import LatencyProfile
from workers.engine.profile import ModelInfo

SCENARIO = "hmfs-multimodal"
HELPER, SWARM = ("acme", "helper"), ("acme", "swarm")


@dataclass(frozen=True)
class MultimodalConfig:
    """One run: the replay's speed, the scenario window, the policy, the agreement bound."""

    speed: float = 0.25
    duration_s: float = 60.0
    policy: str = "hmfs"
    tolerance: float = 0.10
    seed: int | None = None


def _start_worker(profile: str, speed: float, seed: int, log: Path) -> tuple[Any, str]:
    port = free_port()
    argv = [sys.executable, "-m", "control_plane", "worker", "sim", "--port", str(port)]
    argv += ["--profile", profile, "--speed", str(speed), "--seed", str(seed)]
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"worker {profile} did not start (see {log})")


def model_spec(profile: LatencyProfile, scenario: Scenario) -> dict[str, Any]:
    """The admin API's model record for a profile's model, with the scenario's override."""
    m = profile.model
    override = scenario.models.get(m.name)
    return {
        "kind": m.kind,
        "hidden_size": m.hidden_size,
        "num_layers": m.num_layers,
        "max_model_len": m.max_model_len,
        "unified_cost_factor": override.unified_cost_factor if override else None,
        "image_tokens": m.image_tokens.model_dump() if m.image_tokens else None,
        "generation": m.generation.model_dump() if m.generation else None,
        "reason": f"bench {SCENARIO}",
    }


def _wait_models(client: httpx.Client, key: str, names: set[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        resp = client.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
        if resp.status_code == 200 and names <= {m["id"] for m in resp.json()["data"]}:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the gateway does not serve {sorted(names)}")


def exact_image_caps(specs: list[RequestSpec], infos: Mapping[str, ModelInfo]) -> list[RequestSpec]:
    """The specs with an image model's cap set to its output: live, the gateway queues an
    image request as exactly `n · steps` units (a client sends no `max_tokens`), so the
    simulated scheduler must see the same cap, not the generous text default."""
    images = {name for name, info in infos.items() if info.kind == "image"}
    return [replace(s, max_tokens=s.n_out) if s.model in images else s for s in specs]


def deploy(scenario: Scenario, cfg: MultimodalConfig, state: Path) -> tuple[UpProcess, list[Any]]:
    """`arbiter up` with the first worker group, the others started and registered."""
    groups = list(scenario.cluster)
    up = UpProcess.start(
        UpConfig(
            workers=1,
            speed=cfg.speed,
            tenants=tuple(t.name for t in scenario.tenants),
            extra_args=("--profile", groups[0].profile, "--policy", cfg.policy),
            env={"ARBITER_DEFAULT_QUEUE_CAP": "1000000"},  # the scenario has no queue cap
        ),
        state,
    )
    procs: list[Any] = []
    try:
        admin = httpx.Client(
            base_url=up.gateway,
            headers={"Authorization": f"Bearer {up.info['admin_token']}"},
            timeout=10,
        )
        for group in groups:
            profile = scenario.profile(group)
            put = admin.put(
                f"/admin/models/{profile.model.name}", json=model_spec(profile, scenario)
            )
            put.raise_for_status()
        for i, group in enumerate(groups[1:], start=1):
            proc, url = _start_worker(group.profile, cfg.speed, i, state / f"worker-{i}.log")
            procs.append(proc)
            profile = scenario.profile(group)
            body = {"url": url, "id": f"mm-{i}", "model": profile.model.name, "kind": "sim"}
            body |= {"profile": group.profile, "reason": f"bench {SCENARIO}"}
            admin.post("/admin/workers", json=body).raise_for_status()
        _wait_models(admin, next(iter(up.keys().values())), set(model_infos(scenario)))
    except BaseException:
        stop(up, procs)
        raise
    return up, procs


def stop(up: UpProcess, procs: list[Any]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    up.stop()


def window_service(records: Sequence[RequestRecord], end: float) -> dict[str, float]:
    """Unified service each tenant received during `[0, end]` (scenario seconds): the
    contended window, before the drain serves every backlog in full."""
    at = np.array([-1.0, end], dtype=np.float64)  # before 0: what happens at 0 counts
    out: dict[str, float] = {}
    for tenant in sorted({r.tenant for r in records}):
        cum = service_cumulative([r for r in records if r.tenant == tenant], at)
        out[tenant] = float(cum[1] - cum[0])
    return out


def shares(service: Mapping[str, float]) -> dict[str, float]:
    """Each key's share of the total."""
    total = sum(service.values())
    return {k: v / total if total else 0.0 for k, v in service.items()}


def raw_token_shares(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Each tenant's share of raw tokens served (prompt + output, no factor)."""
    tokens: dict[str, float] = {}
    for r in records:
        served = (r.n_in if r.dispatched is not None else 0) + r.n_out
        tokens[r.tenant] = tokens.get(r.tenant, 0.0) + served
    return shares(tokens)


def claims(records: Sequence[RequestRecord], end: float) -> dict[str, float | None]:
    """The HMFS claims' numbers over the contended window `[0, end]`: what `acme/helper` (one
    agent) received over the demand that arrived in it, the same for `acme/swarm` (ten
    agents), and helper's share of acme's service."""
    out: dict[str, float | None] = {}
    service: dict[str, float] = {}
    for name, (tenant, app) in (("helper", HELPER), ("swarm", SWARM)):
        mine = [r for r in records if r.tenant == tenant and r.app == app]
        got = window_service(mine, end).get(tenant, 0.0)
        demand = sum(
            unified_cost(r.n_in, r.length, r.unit_factor) for r in mine if r.arrival <= end
        )
        service[name] = got
        out[f"{name}_served_over_demand"] = got / demand if demand else None
    acme = service["helper"] + service["swarm"]
    out["helper_share_of_acme"] = service["helper"] / acme if acme else None
    return out


def run(
    cfg: MultimodalConfig, state: Path, progress: Callable[[RequestRecord], None] | None = None
) -> dict[str, Any]:
    """Deploy, replay live, simulate, compare; the bench's JSON document."""
    scenario = load_scenario(SCENARIO).with_overrides(cfg.seed, cfg.duration_s)
    specs = exact_image_caps(build_workload(scenario), model_infos(scenario))
    policy = PolicySpec(cfg.policy, cfg.policy)
    up, procs = deploy(scenario, cfg, state)
    try:
        started = time.time()
        target = LiveTarget(up.gateway, up.keys(), cfg.speed, infos=model_infos(scenario))
        records = asyncio.run(replay(specs, unit_factors(scenario), target, progress))
        time.sleep(3.0)  # the recorder's last batch
        kinds = _kind_report(up, started - 5, time.time() + 5)
    finally:
        stop(up, procs)
    sim = run_policy(scenario.as_live(cfg.speed), policy, specs).records
    return document(cfg, records, sim, kinds)


def _kind_report(up: UpProcess, start: float, end: float) -> dict[str, Any]:
    resp = httpx.get(
        f"{up.gateway}/admin/reports/service-by-kind",
        params={"from": start, "to": end},
        headers={"Authorization": f"Bearer {up.info['admin_token']}"},
        timeout=30,
    )
    resp.raise_for_status()
    report: dict[str, Any] = resp.json()
    return report


def document(
    cfg: MultimodalConfig,
    live: Sequence[RequestRecord],
    sim: Sequence[RequestRecord],
    kinds: Mapping[str, Any],
) -> dict[str, Any]:
    """Shares of the contended window, their agreement, the claims and the recorder's
    per-kind totals."""
    end = cfg.duration_s
    live_shares, sim_shares = shares(window_service(live, end)), shares(window_service(sim, end))
    rows = []
    for tenant in sorted(sim_shares):
        a, b = sim_shares[tenant], live_shares.get(tenant, 0.0)
        rel = abs(b - a) / a if a else None
        ok = rel is not None and rel <= cfg.tolerance
        rows.append({"tenant": tenant, "sim": a, "live": b, "relative": rel, "agrees": ok})
    statuses: dict[str, int] = {}
    for r in live:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    return {
        "bench": SCENARIO,
        "config": cfg.__dict__,
        "window_s": [0.0, end],
        "requests": len(live),
        "statuses": statuses,
        "shares": rows,
        "agree": all(row["agrees"] for row in rows),
        "raw_token_shares_live": raw_token_shares(live),
        "claims": {"live": claims(live, end), "sim": claims(sim, end)},
        "service_by_kind": kinds.get("data", []),
    }
