"""Properties over random request sets: exact token counts, bounded KV, limits always held."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.workers.engine.traces import make_engine, summarize
from workers.engine.engine import Engine, EngineRequest, StepResult


@dataclass(frozen=True)
class Case:
    requests: list[tuple[float, EngineRequest]]
    aborts: dict[str, float]  # request id -> abort time
    scheduling: str
    chunked: bool
    kv_tokens: int
    max_num_seqs: int
    budget: int


@st.composite
def cases(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 30))
    t, requests, aborts = 0.0, [], {}
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 0.001, 0.01, 0.05, 0.3]))
        r = EngineRequest(
            f"r{i}",
            draw(st.integers(1, 400)),
            draw(st.integers(1, 200)),
            priority=draw(st.integers(0, 3)),
            arrival=t,
        )
        requests.append((t, r))
        if draw(st.integers(0, 5)) == 0:
            aborts[r.id] = t + draw(st.sampled_from([0.0, 0.005, 0.05, 0.5, 2.0]))
    chunked = draw(st.booleans())
    return Case(
        requests=requests,
        aborts=aborts,
        scheduling=draw(st.sampled_from(["fcfs", "priority"])),
        chunked=chunked,
        kv_tokens=draw(st.integers(640, 6000)),
        max_num_seqs=draw(st.integers(1, 16)),
        budget=draw(st.integers(600 if not chunked else 16, 2048)),
    )


def drive(e: Engine, case: Case) -> list[StepResult]:
    """Arrivals and aborts in time order (an event at a step boundary goes first)."""
    events: list[tuple[float, int, str, EngineRequest | None]]
    events = [(t, 0, r.id, r) for t, r in case.requests]
    events += [(t, 1, rid, None) for rid, t in case.aborts.items()]
    events.sort(key=lambda x: (x[0], x[1], x[2]))
    trace: list[StepResult] = []
    i = 0
    while True:
        t_engine = e.next_event_time()
        if i < len(events) and (t_engine is None or events[i][0] <= t_engine):
            t, _, rid, r = events[i]
            if r is not None:
                e.add(r, t)
            else:
                e.abort(rid, t)
            i += 1
            continue
        if t_engine is None:
            break
        for step in e.advance(t_engine):
            trace.append(step)
            assert 0.0 <= e.kv_usage <= 1.0
            assert e.num_running <= case.max_num_seqs
    trace.extend(e.advance(float("inf")))
    return trace


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_random_request_sets_finish_exactly_within_limits(case: Case) -> None:
    e = make_engine(
        "tiny-cpu",
        seed=3,
        scheduling=case.scheduling,
        enable_chunked_prefill=case.chunked,
        kv_tokens=case.kv_tokens,
        max_num_seqs=case.max_num_seqs,
        max_num_batched_tokens=case.budget,
    )
    trace = drive(e, case)
    s = summarize(trace)  # also checks: first flag on token 1 only, nothing after finishing
    for _, r in case.requests:
        if r.id not in case.aborts:
            assert s.tokens[r.id] == r.n_out
            assert r.id in s.finished_at
        else:
            assert s.tokens.get(r.id, 0) <= r.n_out
    for prev, step in itertools.pairwise(trace):
        assert step.start >= prev.end
    for step in trace:
        assert step.prefill_tokens + step.decode_seqs <= case.budget
        assert step.decode_seqs <= case.max_num_seqs
    assert e.generation_tokens_total == sum(s.tokens.values())
    assert e.num_preemptions == len(s.preempted)
    assert (e.num_running, e.num_waiting, e.kv_usage) == (0, 0, 0.0)
    assert e.next_event_time() is None
