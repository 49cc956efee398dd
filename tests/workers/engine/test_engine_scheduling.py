"""Batching decisions: chunked prefill, seat limit, KV blocks, preemption, abort, priority."""

from __future__ import annotations

import pytest

from tests.workers.engine.traces import at, finish_order, make_engine, req, run, summarize


def test_chunked_prefill_splits_a_long_prompt_within_the_budget() -> None:
    e = make_engine(max_num_batched_tokens=2048)
    trace = run(e, at(0.0, req("a", 5000, 2)))
    assert [s.prefill_tokens for s in trace] == [2048, 2048, 904, 0]
    assert [len(s.tokens) for s in trace] == [0, 0, 1, 1]
    assert trace[2].tokens[0].first  # the step that completes the prompt yields token 1


def test_prefill_chunk_state_and_kv_blocks_between_steps() -> None:
    e = make_engine(max_num_batched_tokens=2048)
    e.add(req("a", 5000, 2), 0.0)
    e.add(req("b", 10, 2), 0.0)
    waiting = e.request_state("b")
    assert waiting is not None and waiting.status == "waiting"
    e.advance(0.0)
    mid = e.request_state("a")  # the first chunk is in progress, not yet computed
    assert mid is not None and (mid.status, mid.computed_tokens, mid.kv_blocks) == (
        "running",
        0,
        2048 // 16,
    )
    end = e.next_event_time()
    assert end is not None
    e.advance(end)
    state = e.request_state("a")
    assert state is not None
    assert (state.computed_tokens, state.generated) == (2048, 0)
    assert state.kv_blocks == 2 * 2048 // 16  # the second chunk's blocks are already held


def test_a_new_prompt_shares_the_step_budget_with_running_decodes() -> None:
    e = make_engine(max_num_batched_tokens=512)
    e.add(req("a", 10, 100), 0.0)
    e.advance(0.0)
    t = e.next_event_time()
    assert t is not None
    e.add(req("b", 2000, 1), t)
    trace = e.advance(1e9)
    mixed = trace[1]
    assert (mixed.decode_seqs, mixed.prefill_tokens) == (1, 511)
    assert all(s.prefill_tokens + s.decode_seqs <= 512 for s in trace)


def test_without_chunked_prefill_a_prompt_waits_for_a_whole_budget() -> None:
    e = make_engine(max_num_batched_tokens=2048, enable_chunked_prefill=False)
    with pytest.raises(ValueError, match="chunked"):
        e.add(req("huge", 5000, 2), 0.0)
    trace = run(e, at(0.0, req("a", 1500, 3), req("b", 1500, 3)))
    assert [s.prefill_tokens for s in trace[:2]] == [1500, 1500]
    assert trace[1].decode_seqs == 1


def test_max_num_seqs_is_respected_and_admission_is_fcfs() -> None:
    e = make_engine(max_num_seqs=4)
    for i in range(10):
        e.add(req(f"r{i}", 64, 20 + i), 0.0)
    trace = []
    while (t := e.next_event_time()) is not None:
        for step in e.advance(t):
            trace.append(step)
            assert step.decode_seqs <= 4
        assert e.num_running <= 4
        assert e.num_running + e.num_waiting == 10 - len(summarize(trace).finished_at)
    s = summarize(trace)
    assert all(s.tokens[f"r{i}"] == 20 + i for i in range(10))
    assert max(s.first_at[f"r{i}"] for i in range(4)) < min(s.first_at[f"r{i}"] for i in (4, 5))
    assert s.first_at["r4"] >= s.finished_at["r0"]


def test_kv_exhaustion_preempts_the_latest_arrival_and_everyone_still_finishes() -> None:
    e = make_engine(kv_tokens=1024)  # 64 blocks; four 200+200 requests need 100 at the end
    reqs = [req(f"r{i}", 200, 200, arrival=i * 0.001) for i in range(4)]
    trace = []
    arrivals = [(r.arrival, r) for r in reqs]
    from workers.engine.replay import replay

    for step in replay(e, arrivals):
        trace.append(step)
        assert 0.0 <= e.kv_usage <= 1.0
    s = summarize(trace)
    assert e.num_preemptions > 0
    assert e.num_preemptions == len(s.preempted)
    assert s.preempted[0] == "r3"
    assert all(s.tokens[r.id] == 200 for r in reqs)
    assert e.prompt_tokens_total == 800 and e.generation_tokens_total == 800
    assert e.kv_usage == 0.0
    # recompute: a preempted request re-prefills its prompt plus what it had generated
    assert sum(step.prefill_tokens for step in trace) > 800


def test_add_refuses_duplicates_and_requests_that_can_never_fit() -> None:
    e = make_engine(kv_tokens=1024)
    e.add(req("a", 10, 10), 0.0)
    with pytest.raises(ValueError, match="duplicate"):
        e.add(req("a", 10, 10), 0.0)
    with pytest.raises(ValueError, match="KV"):
        e.add(req("big", 1000, 25), 0.0)
    with pytest.raises(ValueError):
        e.add(req("empty", 0, 5), 0.0)
    e.add(req("fits", 1000, 24), 0.0)


def test_abort_frees_kv_at_once_and_the_request_emits_nothing_more() -> None:
    e = make_engine()
    e.add(req("a", 1000, 500), 0.0)
    e.add(req("b", 100, 5), 0.0)
    trace = e.advance(0.0) + e.advance(0.5)
    assert e.kv_usage > 0 and e.num_running == 1  # b finished, a still decoding
    in_flight_end = e.next_event_time()
    assert e.abort("a", 0.5) is True
    assert (e.kv_usage, e.num_running, e.request_state("a")) == (0.0, 0, None)
    assert e.next_event_time() == in_flight_end  # the step in progress still ends
    rest = e.advance(1e9)
    assert all(ev.req_id != "a" for step in rest for ev in step.tokens)
    assert e.next_event_time() is None
    assert summarize(trace).tokens["b"] == 5
    assert e.abort("a", 2.0) is False
    e.add(req("a", 10, 2), 3.0)  # the id is free again
    assert summarize(e.advance(1e9)).tokens == {"a": 2}


def test_abort_a_waiting_request() -> None:
    e = make_engine(max_num_seqs=1)
    e.add(req("a", 10, 5), 0.0)
    e.add(req("b", 10, 5), 0.0)
    assert e.num_waiting == 2
    e.advance(0.0)
    assert (e.num_running, e.num_waiting) == (1, 1)
    assert e.abort("b", 0.001)
    assert e.num_waiting == 0
    assert summarize(e.advance(1e9)).tokens == {"a": 5}


def test_priority_mode_serves_lower_values_first() -> None:
    arrivals = at(
        0.0,
        req("a", 32, 4, priority=3),
        req("b", 32, 4, priority=1),
        req("c", 32, 4, priority=2),
        req("d", 32, 4, priority=0),
        req("e", 32, 4, priority=1, arrival=-1.0),  # same priority, earlier arrival
    )
    prio = finish_order(run(make_engine(max_num_seqs=1, scheduling="priority"), arrivals))
    assert prio == ["d", "e", "b", "c", "a"]
    fcfs = finish_order(run(make_engine(max_num_seqs=1), arrivals))
    assert fcfs == ["a", "b", "c", "d", "e"]


def test_priority_ties_break_by_arrival_then_id() -> None:
    arrivals = at(0.0, req("y", 8, 2, 1, 2.0), req("x", 8, 2, 1, 2.0), req("z", 8, 2, 1, 1.0))
    trace = run(make_engine(max_num_seqs=1, scheduling="priority"), arrivals)
    assert finish_order(trace) == ["z", "x", "y"]


def test_a_more_urgent_request_preempts_a_running_less_urgent_one() -> None:
    arrivals = at(0.0, req("low", 64, 100, priority=5)) + at(0.1, req("high", 64, 10, priority=0))
    e = make_engine(max_num_seqs=1, scheduling="priority")
    s = summarize(run(e, arrivals))
    assert s.preempted == ["low"] and e.num_preemptions == 1
    assert s.finished_at["high"] < s.finished_at["low"]
    assert s.tokens == {"low": 100, "high": 10}
    fcfs = make_engine(max_num_seqs=1)
    f = summarize(run(fcfs, arrivals))
    assert fcfs.num_preemptions == 0 and f.finished_at["low"] < f.finished_at["high"]


def test_priority_kv_victim_is_the_largest_priority_value_not_the_latest() -> None:
    reqs = [req("bulk", 200, 200, priority=9, arrival=0.0)] + [
        req(f"r{i}", 200, 200, priority=0, arrival=0.001 * (i + 1)) for i in range(3)
    ]
    e = make_engine(kv_tokens=1024, scheduling="priority")
    s = summarize(run(e, [(r.arrival, r) for r in reqs]))
    assert s.preempted[0] == "bulk"
    assert all(s.tokens[r.id] == 200 for r in reqs)
    assert s.finished_at["bulk"] == max(s.finished_at.values())


def test_a_priority_kv_victim_scheduled_earlier_in_the_step_is_taken_back() -> None:
    # 10 blocks of 16: low holds 5 after its first decodes, high needs a 6th block mid-step
    e = make_engine(kv_tokens=160, scheduling="priority")
    arrivals = at(0.0, req("low", 63, 50, priority=5)) + at(
        0.001, req("high", 80, 40, priority=0, arrival=0.001)
    )
    trace = run(e, arrivals)
    hit = next(i for i, step in enumerate(trace) if step.preempted)
    assert trace[hit].preempted == ("low",)
    assert [ev.req_id for ev in trace[hit].tokens] == ["high"]
    assert (trace[hit].decode_seqs, trace[hit].prefill_tokens) == (1, 0)
    assert summarize(trace).tokens == {"low": 50, "high": 40}
