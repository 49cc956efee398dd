"""Output-length prediction: history only, most specific peers first, bounded, restorable."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control_plane.admission.registry import build_admission
from control_plane.core.dispatcher import Dispatcher
from control_plane.core.job import Job, Outcome
from control_plane.core.lengths import LengthPredictor
from control_plane.core.policy import PolicyContext
from control_plane.placement.registry import build_placement
from control_plane.policies.registry import build_policy
from tests.control_plane.policies.jobs import job


def ok(n_out: int) -> Outcome:
    return Outcome("ok", 10, n_out)


def feed(p: LengthPredictor, lengths: list[int], **where: str) -> None:
    for k, n in enumerate(lengths):
        j = job(f"h{k}", max_tokens=2048, **where)
        p.label(j)
        p.observe(j, ok(n))


def test_a_cold_start_predicts_the_clients_cap() -> None:
    p = LengthPredictor()
    assert p.predict(job("a", max_tokens=700)) == 700


def test_few_answers_move_the_estimate_a_little_and_many_replace_it() -> None:
    p = LengthPredictor(prior_weight=20)
    feed(p, [100] * 5)
    # pool, app, agent each with 5 answers of 100: 2048 → 1658.4 → 1346.7 → 1097.4
    assert p.predict(job("a", max_tokens=2048)) == 1097
    feed(p, [100] * 251)
    assert p.predict(job("a", max_tokens=2048)) == pytest.approx(100, abs=3)
    assert p.predict(job("a", max_tokens=60)) == 60  # never above the cap


def test_the_quantile_is_the_peers_one() -> None:
    p = LengthPredictor(quantile=0.9, prior_weight=0)
    feed(p, list(range(1, 101)))
    assert p.predict(job("a", max_tokens=2048)) == 90
    median = LengthPredictor(prior_weight=0)
    feed(median, [10, 20, 30, 40, 50])
    assert median.predict(job("a", max_tokens=2048)) == 30


def test_each_agent_gets_its_own_lengths_and_a_new_one_its_apps() -> None:
    p = LengthPredictor(prior_weight=20)
    feed(p, [500] * 256, agent="writer")
    feed(p, [20] * 256, agent="router")
    writer = p.predict(job("a", agent="writer", max_tokens=2048))
    router = p.predict(job("a", agent="router", max_tokens=2048))
    assert writer == pytest.approx(500, rel=0.1) and router == pytest.approx(20, abs=15)
    fresh = p.predict(job("a", agent="new", max_tokens=2048))
    assert router < fresh < writer  # the app's pooled lengths, not the cap
    assert p.predict(job("a", tenant="other", model="big", max_tokens=2048)) == 2048
    # A few long answers of a new agent already set it apart from a short app.
    feed(p, [900] * 5, agent="late")
    assert p.predict(job("a", agent="late", max_tokens=2048)) > fresh


def test_only_answers_served_in_full_teach_and_count_as_errors() -> None:
    p = LengthPredictor(prior_weight=0)
    j = job("a", max_tokens=100)
    p.label(j)
    for status in ("aborted", "error", "timeout"):
        p.observe(j, Outcome(status, 10, 3))
    assert p.predict(job("b", max_tokens=100)) == 100 and p.error.n == 0
    p.observe(j, ok(40))
    assert p.error.to_json() == {"n": 1, "mae": 60.0, "under_rate": 0.0}
    assert p.predict(job("c", max_tokens=100)) == 40


def test_a_job_that_came_labelled_keeps_its_prediction() -> None:
    p = LengthPredictor(prior_weight=0)
    feed(p, [5])
    j = job("a", max_tokens=100, predicted_out=77)
    p.label(j)
    assert j.predicted_out == 77


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=400), st.integers(1, 4096))
def test_predictions_stay_within_bounds_and_memory_is_bounded(lengths: list[int], cap: int) -> None:
    p = LengthPredictor(window=32, prior_weight=0)
    feed(p, lengths)
    assert 1 <= p.predict(job("x", max_tokens=cap)) <= cap
    assert all(len(w.order) <= 32 and len(w.ranked) == len(w.order) for w in p._windows.values())
    window = lengths[-32:]
    assert p.predict(job("x", max_tokens=10_000)) == sorted(window)[(len(window) + 1) // 2 - 1]


def test_snapshot_restores_the_same_predictions_through_json() -> None:
    p = LengthPredictor(prior_weight=3)
    rng = random.Random(1)
    for agent in ("a", "b", "c"):
        feed(p, [rng.randint(1, 900) for _ in range(20)], agent=agent)
    q = LengthPredictor(prior_weight=3)
    q.restore(json.loads(json.dumps(p.snapshot())))
    probes = [job("p", agent=a, max_tokens=2048) for a in ("a", "b", "c", "zzz")]
    assert [q.predict(j) for j in probes] == [p.predict(j) for j in probes]
    assert q.error.to_json() == p.error.to_json()
    q.restore({"windows": [["bad"], [["k"], ["x", -1]], 7], "error": "?"})  # skipped, no raise
    assert [q.predict(j) for j in probes] == [p.predict(j) for j in probes]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="quantile"):
        LengthPredictor(quantile=0.0)
    with pytest.raises(ValueError, match="window"):
        LengthPredictor(window=0)


def test_the_dispatcher_labels_every_job_before_the_policy_sees_it() -> None:
    d = Dispatcher(
        build_policy("sjf", PolicyContext()),
        build_admission("capacity", None),
        build_placement("least_loaded"),
        lengths=LengthPredictor(prior_weight=0),
    )
    for k in range(2):
        done = job(f"d{k}", agent="short", max_tokens=1000)
        d.push(done, 0.0)
        d.remove(done.id)
        d.on_finish(done, ok(12), 1.0)
    long_one, short_one = job("L", model="big", max_tokens=1000), job("S", agent="short")
    short_one.max_tokens = 1000
    d.push(long_one, 2.0)
    d.push(short_one, 2.0)
    assert (long_one.predicted_out, short_one.predicted_out) == (1000, 12)
    assert json.loads(json.dumps(d.snapshot()))["lengths"]["windows"]
    adopted: list[Job] = [job("A", agent="short", max_tokens=500)]
    d.adopt(adopted, 3.0)
    assert adopted[0].predicted_out == 12


def test_memory_is_bounded_to_the_most_recently_answered_groups() -> None:
    p = LengthPredictor(max_keys=10, snapshot_tail=4)
    for k in range(50):  # clients naming a new agent each time
        feed(p, [k + 1] * 6, agent=f"a{k}")
    assert len(p._windows) == 10
    assert all(len(lengths) <= 4 for _, lengths in p.snapshot()["windows"])
