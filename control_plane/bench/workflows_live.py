"""`arbiter bench workflows`: a workflow scenario live, as real multi-agent clients, beside its
simulation.

The live side is a real `arbiter up` whose pool is the scenario's cluster as simulated workers
(the group's profile, batch size and KV capacity; speed = the group's speed × `--speed`),
running the policy and placement under test. Every workflow is sent by the closed-loop replay
(`control_plane.sim.live_bench.replay`): its entry call at its arrival time, each next call
only once the call it waits on ended, after the think time, with `X-Arbiter-Workflow` and
`X-Arbiter-Upstream` as agent code sends them. The simulated side runs the same drawn
workflows through the same policy and placement objects on a virtual clock with the live
stack's constants (`Scenario.as_live`). Compared: program-level metrics per application
(`control_plane.sim.program_metrics`; the mean workflow latency must agree within
`tolerance`), what the leader's orchestrator learned (each learned edge frequency beside the
one in the workflows sent), and the recorder's own program report from SQL.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from control_plane.bench.multimodal import stop
from control_plane.bench.up_process import UpConfig, UpProcess
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import policy_class
from control_plane.sim.cluster import unit_factors
from control_plane.sim.live_bench import LiveTarget, replay
from control_plane.sim.program_metrics import workflow_metrics
from control_plane.sim.records import RequestRecord
from control_plane.sim.runner import PluginChoice, run_policy
from control_plane.sim.scenario import Scenario, load_scenario
from control_plane.sim.setup import PolicySpec
from control_plane.sim.workload import RequestSpec, build_workload


@dataclass(frozen=True)
class WorkflowsConfig:
    """One run: scenario, policy and placement, the replay's speed, the window, the bound."""

    scenario: str = "kairos-colocated"
    policy: str = "kairos"
    placement: str = "kairos_slots"
    speed: float = 0.25
    duration_s: float = 60.0
    tolerance: float = 0.20
    seed: int | None = None


def deploy(scenario: Scenario, cfg: WorkflowsConfig, state: Path) -> UpProcess:
    """`arbiter up` with the scenario's (single) worker group, the policy and the placement."""
    if len(scenario.cluster) != 1:
        raise ValueError(f"{scenario.name}: one worker group expected, not {len(scenario.cluster)}")
    (group,) = scenario.cluster
    extra: tuple[str, ...] = ("--profile", group.profile, "--policy", cfg.policy)
    kv_tokens = group.kv_tokens or scenario.profile(group).kv_tokens
    if kv_tokens:
        extra += ("--kv-tokens", str(kv_tokens))
    up = UpProcess.start(
        UpConfig(
            workers=group.count,
            speed=cfg.speed * group.speed,
            max_num_seqs=group.max_num_seqs,
            tenants=tuple(t.name for t in scenario.tenants),
            extra_args=extra,
            env={
                "ARBITER_DEFAULT_QUEUE_CAP": "1000000",  # the scenario has no queue cap
                # a takeover mid-run forgets the open workflows, so what the leader learned
                # would cover only the calls after it: a lease that a slow box's few-second
                # stall (ten processes on two cores) does not end
                "ARBITER_LEASE_TTL_S": "6",
            },
        ),
        state,
    )
    try:
        body = {"value": {"name": cfg.placement, "params": {}}, "reason": "bench workflows"}
        _admin(up, "PUT", "/admin/knobs/placement", json=body)
        _wait_placement(up, cfg.placement)
    except BaseException:
        up.stop()
        raise
    return up


def _admin(up: UpProcess, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {up.info['admin_token']}"}
    resp = httpx.request(method, f"{up.gateway}{path}", headers=headers, timeout=30, **kwargs)
    resp.raise_for_status()
    return resp


def _wait_placement(up: UpProcess, name: str) -> None:
    """Until the leader's live view reports the placement (it applies knobs on its next tick)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        live = _admin(up, "GET", "/admin/policy").json()
        if (live.get("placement") or {}).get("name") == name:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the leader did not apply placement {name!r}")


def sent_frequencies(
    records: Sequence[RequestRecord], specs: Sequence[RequestSpec]
) -> dict[str, Any]:
    """Per application, each `upstream → agent` edge of the calls actually sent (`records`),
    as the orchestrator counts it (`AgentGraph.frequency`): the calls of `agent` that a call
    of `upstream` triggered, over the calls of `upstream`."""
    by_id = {s.id: s for s in specs}
    calls: Counter[tuple[str, str]] = Counter()
    edges: Counter[tuple[str, str, str]] = Counter()
    for r in records:
        spec = by_id.get(r.id)
        if spec is None or spec.workflow is None:
            continue
        app = f"{r.tenant}/{r.app}"
        calls[(app, r.agent)] += 1
        if spec.upstream is not None:
            edges[(app, spec.upstream, r.agent)] += 1
    out: dict[str, Any] = {}
    for (app, a, b), n in sorted(edges.items()):
        out.setdefault(app, {})[f"{a}->{b}"] = n / calls[(app, a)]
    return out


def learned_frequencies(learned: Mapping[str, Any]) -> dict[str, Any]:
    """Per application, each learned edge's frequency (`GET /admin/learned/workflows`)."""
    out: dict[str, Any] = {}
    for app in learned.get("data") or []:
        key = f"{app['tenant']}/{app['app']}"
        out[key] = {f"{e['from']}->{e['to']}": e["frequency"] for e in app.get("edges") or []}
    return out


def run(
    cfg: WorkflowsConfig, state: Path, progress: Callable[[RequestRecord], None] | None = None
) -> dict[str, Any]:
    """Deploy, replay live in a closed loop, simulate, compare; the bench's JSON document.
    An unknown policy or placement is refused (`UnknownPluginError`) before anything starts."""
    policy_class(cfg.policy)
    build_placement(cfg.placement)
    scenario = load_scenario(cfg.scenario).with_overrides(cfg.seed, cfg.duration_s)
    specs = build_workload(scenario)
    up = deploy(scenario, cfg, state)
    try:
        started = time.time()
        target = LiveTarget(up.gateway, up.keys(), cfg.speed)
        records = asyncio.run(replay(specs, unit_factors(scenario), target, progress))
        time.sleep(3.0)  # the recorder's last batch; the leader's next live checkpoint
        learned = _admin(up, "GET", "/admin/learned/workflows").json()
        sql = _program_report(up, started - 5, time.time() + 5)
    finally:
        stop(up, [])
    plugins = PluginChoice(placement=cfg.placement)
    label = PolicySpec(cfg.policy, cfg.policy)
    sim = run_policy(scenario.as_live(cfg.speed), label, specs, plugins=plugins).records
    return document(cfg, specs, records, sim, learned, sql)


def _program_report(up: UpProcess, start: float, end: float) -> Any:
    try:
        resp = _admin(up, "GET", "/admin/reports/programs", params={"from": start, "to": end})
    except httpx.HTTPStatusError as exc:
        return {"error": f"{exc.response.status_code} {exc.response.text[:200]}"}
    return resp.json()


def _mean_e2e(metrics: Mapping[str, Any]) -> float | None:
    """Mean workflow latency over every application's completed workflows."""
    apps = [m for m in metrics.values() if m["completed"]]
    total = sum(int(m["completed"]) for m in apps)
    if not total:
        return None
    return sum(float(m["e2e_s"]["mean"]) * int(m["completed"]) for m in apps) / total


def document(
    cfg: WorkflowsConfig,
    specs: Sequence[RequestSpec],
    live: Sequence[RequestRecord],
    sim: Sequence[RequestRecord],
    learned: Mapping[str, Any],
    sql: Any,
) -> dict[str, Any]:
    """Program metrics live and simulated, their agreement, learned vs sent frequencies."""
    live_m, sim_m = workflow_metrics(live), workflow_metrics(sim)
    a, b = _mean_e2e(sim_m), _mean_e2e(live_m)
    rel = abs(b - a) / a if a and b is not None else None
    statuses = Counter(r.status for r in live)
    return {
        "bench": "workflows",
        "config": cfg.__dict__,
        "calls": len(live),
        "statuses": dict(statuses),
        "programs": {"live": live_m, "sim": sim_m},
        "mean_e2e_s": {"sim": a, "live": b, "relative": rel},
        "agree": rel is not None and rel <= cfg.tolerance,
        "frequencies": {
            "sent": sent_frequencies(live, specs),
            "learned": learned_frequencies(learned),
        },
        "learned": learned,
        "sql_programs": sql,
    }
