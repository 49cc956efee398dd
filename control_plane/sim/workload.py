"""A scenario's requests, drawn once and deterministically: the input of both sim and bench.

Every stream (and every agent copy of an `agent: "*"` stream) has its own RNGs for arrival
times and lengths, seeded from the scenario seed and the stream's position, so adding a stream
does not change the requests of the others. Requests are ordered by arrival time (ties by
stream order) and numbered `r0, r1, …` in that order. A prompt is shortened when prompt plus
output would exceed the model's `max_model_len` (vLLM would refuse the request).

No oracle: `n_out` is what the model *will* generate (it ends with EOS there), known to the
engine model only; `max_tokens` is the client's cap — the class's `max_tokens` draw, else
`DEFAULT_MAX_TOKENS`, lowered to the room the prompt leaves in the context — and is all the
scheduler sees. A cap below the drawn length truncates the answer there (finish `length`).
An image model's request is the exception: its output (`n · steps` denoising units) is what
the client asks for, not a prediction, and the gateway queues it as exactly that
(`gateway/images.py`), so its cap is its output.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass

from control_plane.sim.request_spec import DEFAULT_MAX_TOKENS, RequestSpec
from control_plane.sim.scenario import RequestClass, Scenario, Stream, merge_slo
from control_plane.sim.traces import Trace, TraceError, TraceRow
from control_plane.sim.workflow_draw import workflow_specs

__all__ = ["DEFAULT_MAX_TOKENS", "RequestSpec", "build_workload"]


@dataclass(frozen=True, slots=True)
class _Draft:
    arrival: float
    order: tuple[int, int, int]
    tenant: str
    app: str
    agent: str
    cls: str | None
    n_in: int | None
    n_out: int | None
    cap: int | None = None


class _ClassPicker:
    def __init__(self, stream: Stream) -> None:
        mix = stream.mix or ({stream.cls: 1.0} if stream.cls else {})
        self.names = list(mix)
        self.cum = list(itertools.accumulate(mix.values()))

    def pick(self, rng: random.Random) -> str | None:
        if not self.names:
            return None
        if len(self.names) == 1:
            return self.names[0]
        return self.names[bisect.bisect_right(self.cum, rng.random() * self.cum[-1])]


def _stream_drafts(s: Scenario, index: int, stream: Stream) -> list[_Draft]:
    tenant = s.tenant(stream.tenant)
    app = tenant.app(stream.app or tenant.apps[0].name)
    assert app is not None
    if isinstance(stream.arrival, Trace):
        return _trace_drafts(s, index, stream, stream.arrival.rows(s.base_dir, s.duration_s))
    agents = app.agent_names() if stream.agent == "*" else [stream.agent or app.agent_names()[0]]
    picker = _ClassPicker(stream)
    drafts: list[_Draft] = []
    for copy, agent in enumerate(agents):
        times_rng = random.Random(f"{s.seed}:times:{index}:{agent}")
        class_rng = random.Random(f"{s.seed}:classes:{index}:{agent}")
        times = stream.arrival.times(times_rng, s.duration_s, s.load_scale)
        for k, t in enumerate(times):
            cls = picker.pick(class_rng)
            drafts.append(
                _Draft(t, (index, copy, k), tenant.name, app.name, agent, cls, None, None)
            )
    return drafts


def _trace_drafts(s: Scenario, index: int, stream: Stream, rows: list[TraceRow]) -> list[_Draft]:
    drafts = []
    where = f"workload[{index}]: trace {stream.arrival.path}"  # type: ignore[union-attr]
    tenants = {t.name for t in s.tenants}
    for k, row in enumerate(rows):
        if (row.tenant or stream.tenant) not in tenants:
            raise TraceError(f"{where}, row {k}: unknown tenant {row.tenant!r}")
        tenant = s.tenant(row.tenant or stream.tenant)
        app = tenant.app(row.app or stream.app or tenant.apps[0].name)
        if app is None:
            raise TraceError(f"{where}, row {k}: tenant {tenant.name!r} has no app {row.app!r}")
        agent = row.agent or stream.agent or app.agent_names()[0]
        if agent == "*" or app.agent(agent) is None:
            raise TraceError(f"{where}, row {k}: app {app.name!r} has no agent {agent!r}")
        cls = row.cls or stream.cls
        if cls is not None and cls not in s.classes:
            raise TraceError(f"{where}, row {k}: unknown class {cls!r}")
        drafts.append(
            _Draft(
                row.time,
                (index, 0, k),
                tenant.name,
                app.name,
                agent,
                cls,
                row.n_in,
                row.n_out,
                row.max_tokens,
            )
        )
    return drafts


def build_workload(s: Scenario) -> list[RequestSpec]:
    """Every request of the scenario, in arrival order (see the module docstring), then the
    workflows' calls (`workflow_draw`): their entry calls merged in arrival order, each later
    call right after (its arrival is set when it is released)."""
    calls = [c for i, t in enumerate(s.workflows) for c in workflow_specs(s, i, t)]
    merged = sorted(
        _stream_specs(s) + [c for c in calls if c.after is None], key=lambda r: r.arrival
    )
    return merged + [c for c in calls if c.after is not None]


def _stream_specs(s: Scenario) -> list[RequestSpec]:
    drafts = [d for i, st in enumerate(s.workload) for d in _stream_drafts(s, i, st)]
    drafts.sort(key=lambda d: (d.arrival, d.order))
    default_model = s.served_models()[0]
    max_len = {s.profile(g).model.name: s.profile(g).model.max_model_len for g in s.cluster}
    images = s.image_models()
    length_rngs: dict[int, random.Random] = {}
    cap_rngs: dict[int, random.Random] = {}
    out = []
    for k, d in enumerate(drafts):
        rng = length_rngs.setdefault(d.order[0], random.Random(f"{s.seed}:lengths:{d.order[0]}"))
        cap_rng = cap_rngs.setdefault(d.order[0], random.Random(f"{s.seed}:caps:{d.order[0]}"))
        stream = s.workload[d.order[0]]
        rc: RequestClass | None = s.classes.get(d.cls) if d.cls else None
        model = (rc.model if rc else None) or default_model
        n_in = d.n_in if d.n_in is not None else (rc.prompt.sample(rng) if rc else 1)
        n_out = d.n_out if d.n_out is not None else (rc.output.sample(rng) if rc else 1)
        # A text prompt is cut by what the client knows, never by the answer's true length
        # (that would hand it to the scheduler through n_in and the cap); an image request
        # asks for exactly n · steps, so keeping its room gives nothing away.
        if model in images:
            n_out = min(n_out, max_len[model] - 1)
            n_in = max(1, min(n_in, max_len[model] - n_out))
        else:
            n_in = max(1, min(n_in, max_len[model] - 1))
        wanted = d.cap or (
            rc.max_tokens.sample(cap_rng) if rc and rc.max_tokens else DEFAULT_MAX_TOKENS
        )
        cap = max(1, min(wanted, max_len[model] - n_in))
        n_out = min(n_out, cap)
        if model in images:
            cap = n_out  # what the gateway queues an image request as: exactly n · steps
        tenant = s.tenant(d.tenant)
        app = tenant.app(d.app)
        agent = app.agent(d.agent) if app else None
        slo = merge_slo(
            stream.slo,
            agent.slo if agent else None,
            app.slo if app else None,
            tenant.slo,
            rc.slo if rc else None,
        )
        task = rc.task if rc else None
        out.append(
            RequestSpec(
                f"r{k}",
                d.arrival,
                d.tenant,
                d.app,
                d.agent,
                model,
                d.cls,
                task,
                n_in,
                n_out,
                slo,
                tenant.tier,
                cap,
            )
        )
    return out
