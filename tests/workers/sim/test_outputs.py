"""The output-length rule: exact, drawn and clipped, seeded per request, cut by stop strings."""

from __future__ import annotations

from dataclasses import replace

from workers.engine import OutputLenDist
from workers.sim.outputs import plan_output
from workers.sim.requests import GenerationRequest
from workers.sim.tokens import count_tokens

DIST = OutputLenDist(mean=40, sigma=0.8)
BASE = GenerationRequest(
    kind="completion",
    n_in=10,
    max_tokens=64,
    min_tokens=0,
    exact=False,
    priority=0,
    stop=(),
    stream=False,
    include_usage=False,
    continuous_usage=False,
    request_id=None,
)


def test_exact_requests_get_max_tokens() -> None:
    for i in range(20):
        plan = plan_output(replace(BASE, exact=True), DIST, seed=1, index=i)
        assert (plan.n_out, plan.finish) == (64, "length")
        assert count_tokens(plan.text(0, plan.n_out), bos=False) == 64


def test_min_tokens_ends_the_answer_there_with_eos() -> None:
    for n in (1, 5, 49):
        plan = plan_output(replace(BASE, min_tokens=n, max_tokens=50), DIST, seed=3, index=n)
        assert (plan.n_out, plan.finish, plan.eos_last) == (n, "stop", True)
    plan = plan_output(replace(BASE, min_tokens=50, max_tokens=50), DIST, seed=3, index=0)
    assert (plan.n_out, plan.finish) == (50, "length")


def test_drawn_lengths_are_clipped_and_end_right() -> None:
    req = replace(BASE, min_tokens=0, max_tokens=50)
    plans = [plan_output(req, DIST, seed=3, index=i) for i in range(300)]
    lengths = [p.n_out for p in plans]
    assert all(1 <= n <= 50 for n in lengths)
    assert len(set(lengths)) > 10  # really drawn
    for p in plans:
        assert p.finish == ("length" if p.n_out == 50 else "stop")
        if p.finish == "stop":  # the EOS token is counted but has no text
            assert count_tokens(p.text(0, p.n_out), bos=False) == p.n_out - 1
            assert p.text(p.n_out - 1, 1) == ""


def test_same_seed_and_order_same_lengths() -> None:
    def draw(seed: int) -> list[int]:
        return [plan_output(BASE, DIST, seed, i).n_out for i in range(50)]

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_stop_string_ends_the_answer() -> None:
    req = replace(BASE, exact=True, stop=("dolor",))
    plan = plan_output(req, DIST, seed=0, index=0)
    assert (plan.n_out, plan.finish, plan.stop_reason) == (3, "stop", "dolor")
    assert plan.text(0, 3) == " lorem ipsum "


def test_stop_string_before_min_tokens_is_ignored() -> None:
    req = replace(BASE, exact=True, min_tokens=10, max_tokens=10, stop=("ipsum",))
    plan = plan_output(req, DIST, seed=0, index=0)
    assert (plan.n_out, plan.finish, plan.stop_reason) == (10, "length", None)
