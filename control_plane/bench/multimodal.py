"""`arbiter bench hmfs-multimodal`: the HMFS multi-modal scenario live, beside its simulation.

The live side is a real `arbiter up` (gateway, scheduler running the policy, recorder, SQLite)
whose pool is the scenario's cluster as simulated workers of the three kinds (an LLM, a VLM and
an image model, all at `--speed`), each registered with its engine's batch size and KV
capacity, the models registered through the admin API with the scenario's Unified Token
overrides (the registry's factors are then the simulator's), and the scenario's admission set
as the admission knob (`live_admission`). Every request is sent in its kind's shape
(`control_plane.sim.live_shapes`: token-id prompts, chat with real 448×448 images, image
generations) by the OpenAI API at its arrival time. The simulated side runs the same request
list through the same policy and admission on a virtual clock with the live stack's
constants (`Scenario.as_live`). What is compared (`multimodal_report`), over the contended
window `[0, duration]`: each tenant's share of the unified service, live vs simulated (they
agree when within `tolerance`, relative), with a breakdown per tenant and model; the HMFS
claims live and simulated (the single-agent app `acme/helper` receives what it asks for
while the ten-agent `acme/swarm` gets the rest of acme's share; the image tenant's share of
service far exceeds its share of raw tokens: it is charged by unified cost); and the
recorder's own per-kind totals from SQL. Both sides' records are written to the state
directory (`records-live.json`, `records-sim.json`).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from control_plane.bench.multimodal_report import (
    agreement,
    by_model,
    claims,
    raw_token_shares,
)
from control_plane.bench.up_process import UpConfig, UpProcess, free_port
from control_plane.contracts.knobs import PluginChoice
from control_plane.scheduler.rebuild import DEFAULT_ADMISSION
from control_plane.sim.cluster import unit_factors
from control_plane.sim.live_bench import LiveTarget, replay
from control_plane.sim.live_shapes import model_infos
from control_plane.sim.records import RequestRecord
from control_plane.sim.runner import PluginChoice as SimPlugins
from control_plane.sim.runner import run_policy
from control_plane.sim.scenario import Scenario, WorkerGroup, load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import build_workload
from workers.engine import LatencyProfile

SCENARIO = "hmfs-multimodal"


@dataclass(frozen=True)
class MultimodalConfig:
    """One run: the replay's speed, the scenario window, the policy, the agreement bound."""

    speed: float = 0.25
    duration_s: float = 60.0
    policy: str = "hmfs"
    tolerance: float = 0.10
    seed: int | None = None


def _start_worker(
    group: WorkerGroup, profile: LatencyProfile, speed: float, seed: int, log: Path
) -> tuple[Any, str]:
    port = free_port()
    argv = [sys.executable, "-m", "control_plane", "worker", "sim", "--port", str(port)]
    argv += ["--profile", group.profile, "--speed", str(speed), "--seed", str(seed)]
    for flag, value in _engine_sizes(group, profile).items():
        argv += [flag, str(value)]
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
    raise RuntimeError(f"worker {group.profile} did not start (see {log})")


def _engine_sizes(group: WorkerGroup, profile: LatencyProfile) -> dict[str, int]:
    """The worker's engine sizes as the simulator builds them: the group's, else the profile's."""
    return {
        "--max-num-seqs": group.max_num_seqs or profile.max_num_seqs,
        "--max-num-batched-tokens": group.max_num_batched_tokens or profile.max_num_batched_tokens,
        "--kv-tokens": group.kv_tokens or profile.kv_tokens,
    }


def worker_body(
    group: WorkerGroup, profile: LatencyProfile, url: str, worker_id: str
) -> dict[str, Any]:
    """The admin API's worker record: with its engine's batch size and KV capacity, which the
    live scheduler's admission reads (an unregistered size is the registry's default of 256
    sequences: an 8-image engine would then be sent every image at once, to queue inside it)."""
    sizes = _engine_sizes(group, profile)
    return {
        "url": url,
        "id": worker_id,
        "model": profile.model.name,
        "kind": "sim",
        "profile": group.profile,
        "max_num_seqs": sizes["--max-num-seqs"],
        "kv_tokens": sizes["--kv-tokens"],
        "reason": f"bench {SCENARIO}",
    }


def live_admission(scenario: Scenario) -> PluginChoice:
    """The admission both sides run: the scenario's, over the live stack's default params
    when it is the same plug-in (`skip_waiting: false` there: live, the engine's `waiting`
    is a scrape behind). Without it, `arbiter up` runs its default and the simulator the
    scenario's — `hmfs-multimodal`'s `token_fence` alone moves studio's share 3 points."""
    sched = scenario.scheduler
    base = dict(DEFAULT_ADMISSION.params) if sched.admission == DEFAULT_ADMISSION.name else {}
    return PluginChoice(sched.admission, {**base, **sched.admission_params})


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


def deploy(scenario: Scenario, cfg: MultimodalConfig, state: Path) -> tuple[UpProcess, list[Any]]:
    """`arbiter up` with the first worker group, the others started and registered with their
    engines' sizes, every model registered, and the scenario's admission (`live_admission`)
    applied by the leader."""
    first, *others = scenario.cluster
    head = scenario.profile(first)
    kv_tokens = str(first.kv_tokens or head.kv_tokens)
    extra = ("--profile", first.profile, "--policy", cfg.policy, "--kv-tokens", kv_tokens)
    up = UpProcess.start(
        UpConfig(
            workers=first.count,
            speed=cfg.speed * first.speed,
            max_num_seqs=first.max_num_seqs or head.max_num_seqs,
            tenants=tuple(t.name for t in scenario.tenants),
            extra_args=extra,
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
        for group in scenario.cluster:
            profile = scenario.profile(group)
            put = admin.put(
                f"/admin/models/{profile.model.name}", json=model_spec(profile, scenario)
            )
            put.raise_for_status()
        for i, group in enumerate(others, start=1):
            profile = scenario.profile(group)
            for k in range(group.count):
                name = f"mm-{i}" if group.count == 1 else f"mm-{i}-{k}"
                log = state / f"{name}.log"
                proc, url = _start_worker(group, profile, cfg.speed * group.speed, i, log)
                procs.append(proc)
                body = worker_body(group, profile, url, name)
                admin.post("/admin/workers", json=body).raise_for_status()
        _wait_models(admin, next(iter(up.keys().values())), set(model_infos(scenario)))
        _apply_admission(admin, live_admission(scenario))
    except BaseException:
        stop(up, procs)
        raise
    return up, procs


def _apply_admission(admin: httpx.Client, choice: PluginChoice) -> None:
    """Set the admission knob; return once the leader reports running it (next tick)."""
    body = {"value": choice.to_json(), "reason": f"bench {SCENARIO}: the scenario's admission"}
    admin.put("/admin/knobs/admission", json=body).raise_for_status()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        live = admin.get("/admin/policy").json().get("admission") or {}
        params = live.get("params") or {}
        if live.get("name") == choice.name and all(
            params.get(k) == v for k, v in choice.params.items()
        ):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the leader did not apply admission {choice.to_json()}")


def stop(up: UpProcess, procs: list[Any]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    up.stop()


def run(
    cfg: MultimodalConfig, state: Path, progress: Callable[[RequestRecord], None] | None = None
) -> dict[str, Any]:
    """Deploy, replay live, simulate (same requests, same admission), compare; the bench's
    JSON document. Both sides' records are written to the state directory."""
    scenario = load_scenario(SCENARIO).with_overrides(cfg.seed, cfg.duration_s)
    specs = build_workload(scenario)
    policy = PolicySpec(cfg.policy, cfg.policy)
    admission = live_admission(scenario)
    up, procs = deploy(scenario, cfg, state)
    failures: dict[str, int] = {}
    try:
        started = time.time()
        target = LiveTarget(up.gateway, up.keys(), cfg.speed, infos=model_infos(scenario))
        records = asyncio.run(
            replay(specs, unit_factors(scenario), target, progress, failures=failures)
        )
        time.sleep(3.0)  # the recorder's last batch
        kinds = _kind_report(up, started - 5, time.time() + 5)
    finally:
        stop(up, procs)
    plugins = SimPlugins(admission=admission.name, admission_params=dict(admission.params))
    sim = run_policy(scenario.as_live(cfg.speed), policy, specs, plugins=plugins).records
    write_records(state, {"live": records, "sim": sim})
    doc = document(cfg, records, sim, kinds)
    return {**doc, "admission": admission.to_json(), "failures": failures}


def write_records(state: Path, sides: Mapping[str, Sequence[RequestRecord]]) -> None:
    """Every request's record of each side, `records-<side>.json` in the state directory
    (to compare the two sides request by request)."""
    for side, records in sides.items():
        rows = [r.to_json() for r in records]
        (state / f"records-{side}.json").write_text(json.dumps(rows) + "\n", encoding="utf-8")


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
    """Shares of the contended window, their agreement, the claims, the breakdown per tenant
    and model of both sides, and the recorder's per-kind totals (`multimodal_report`)."""
    end = cfg.duration_s
    rows = agreement(live, sim, end, cfg.tolerance)
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
        "by_model": {"live": by_model(live, end), "sim": by_model(sim, end)},
        "service_by_kind": kinds.get("data", []),
    }
