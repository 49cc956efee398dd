"""Drawing a scenario's workflows: each instance's calls, lengths and dependencies, once and
deterministically (the simulator and `arbiter bench` replay the same draw).

Per template, arrival times come from its own RNG; per instance, the path (branch choices,
loop rounds) from an RNG seeded by the template and the instance, so one template's draw does
not move when another is added. A call's `after` is the call whose end releases it (its
upstream call, or for a `sequence` step the previous sibling); its `arrival` is then only the
workflow's arrival — the simulator sets the real one at release (end + think time).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from control_plane.sim.request_spec import DEFAULT_MAX_TOKENS, RequestSpec
from control_plane.sim.scenario import Scenario, merge_slo
from control_plane.sim.workflow_spec import WorkflowStep, WorkflowTemplate


@dataclass(frozen=True, slots=True)
class _Node:
    index: int
    agent: str
    upstream: int | None
    after: int | None


def expand(template: WorkflowTemplate, rng: random.Random) -> list[_Node]:
    """The calls of one instance in issue order: entry first, then breadth-first."""
    nodes = [_Node(0, template.entry, None, None)]
    fired: dict[str, int] = {}
    todo = deque([nodes[0]])
    while todo:
        node = todo.popleft()
        step = template.step(node.agent)
        if step is None or len(nodes) >= template.max_calls:
            continue
        if step.max_times is not None and fired.get(step.source, 0) >= step.max_times:
            continue
        targets = _chosen(step, rng)
        if targets:
            fired[step.source] = fired.get(step.source, 0) + 1
        after = node.index
        for agent in targets[: template.max_calls - len(nodes)]:
            child = _Node(len(nodes), agent, node.index, after)
            nodes.append(child)
            todo.append(child)
            if step.mode == "sequence":
                after = child.index
    return nodes


def _chosen(step: WorkflowStep, rng: random.Random) -> list[str]:
    if step.mode == "branch":
        u, cum = rng.random(), 0.0
        for target in step.to:
            cum += target.p
            if u < cum:
                return [target.agent]
        return []
    return [t.agent for t in step.to if rng.random() < t.p]


def workflow_specs(s: Scenario, index: int, template: WorkflowTemplate) -> list[RequestSpec]:
    """Every call of every instance of `template` (the `index`-th of the scenario)."""
    tenant = s.tenant(template.tenant)
    app = tenant.app(template.app or tenant.apps[0].name)
    if app is None:
        raise ValueError(f"workflow {template.name!r}: tenant {tenant.name!r} has no app")
    times = template.arrival.times(
        random.Random(f"{s.seed}:wf-times:{index}"), s.duration_s, s.load_scale
    )
    lengths = random.Random(f"{s.seed}:wf-lengths:{index}")
    default_model = s.served_models()[0]
    max_len = {s.profile(g).model.name: s.profile(g).model.max_model_len for g in s.cluster}
    images = s.image_models()
    out: list[RequestSpec] = []
    for k, t in enumerate(times):
        wf = f"{template.name}-{k}"
        nodes = expand(template, random.Random(f"{s.seed}:wf-path:{index}:{k}"))
        made: list[RequestSpec] = []
        for node in nodes:
            spec = template.agents[node.agent]
            rc = s.classes[spec.cls]
            model = rc.model or default_model
            n_out = min(rc.output.sample(lengths), max_len[model] - 2)
            n_in = rc.prompt.sample(lengths)
            if spec.include_upstream and node.upstream is not None:
                n_in += made[node.upstream].n_out
            room = n_out if model in images else 1  # a text answer's length is no input
            n_in = max(1, min(n_in, max_len[model] - room))
            wanted = rc.max_tokens.sample(lengths) if rc.max_tokens else DEFAULT_MAX_TOKENS
            cap = max(1, min(wanted, max_len[model] - n_in))
            if model in images:
                cap = min(n_out, cap)  # asked for exactly, as the gateway queues it
            agent = app.agent(node.agent)
            made.append(
                RequestSpec(
                    f"{wf}.{node.index}",
                    t,
                    tenant.name,
                    app.name,
                    node.agent,
                    model,
                    spec.cls,
                    rc.task,
                    n_in,
                    min(n_out, cap),
                    merge_slo(agent.slo if agent else None, app.slo, tenant.slo, rc.slo),
                    tenant.tier,
                    cap,
                    workflow=wf,
                    upstream=None if node.upstream is None else nodes[node.upstream].agent,
                    after=None if node.after is None else f"{wf}.{node.after}",
                    think_s=spec.think_s if node.upstream is not None else 0.0,
                )
            )
        out += made
    return out
