"""ExFairS (docs/algorithms.md §4): SAFI, credit exchange, proportional priority enqueueing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.core.job import Job, Slo
from control_plane.core.ledger import Ledger, Node
from control_plane.core.policy import PolicyContext
from control_plane.policies.credits import exchange_credits
from control_plane.policies.exfairs import ExfairsPolicy
from control_plane.policies.proportional_queue import ProportionalQueue
from control_plane.policies.registry import build_policy
from control_plane.policies.safi import jain, safi_scores
from tests.control_plane.policies.jobs import always, job
from tests.control_plane.policies.service_loop import ServiceLoop


def ids(queue: ProportionalQueue) -> list[str]:
    return [j.id for j, _ in queue]


# -- Algorithm 2 ---------------------------------------------------------------------------
def test_algorithm_2_worked_example() -> None:
    queue = ProportionalQueue(multiplier=1.0, p_max=32)
    for i in range(6):
        queue.insert(job(f"low{i}"), 5)
    # p=0 is new and most urgent: N_h=0, N_tot=2, r=0, N_o=6 → P_f=6: to the front.
    assert queue.insert(job("a"), 0) == 0
    # p=3: N_h=1 (0<3), N_tot=3, r=1/3, N_o=6 → ⌊6·2/3⌋=4 → position 7−4=3.
    assert queue.insert(job("b"), 3) == 3
    # p=5 (present): N_o=0 → append.
    assert queue.insert(job("c"), 5) == 8
    assert ids(queue) == ["a", "low0", "low1", "b", "low2", "low3", "low4", "low5", "c"]


def test_p_max_and_multiplier_limit_the_jump() -> None:
    queue = ProportionalQueue(multiplier=0.5, p_max=3)
    for i in range(10):
        queue.insert(job(f"q{i}"), 9)
    assert queue.insert(job("x"), 0) == 10 - 3  # ⌊10·1⌋·0.5 = 5, capped by P_max = 3
    queue = ProportionalQueue(multiplier=0.5, p_max=32)
    for i in range(10):
        queue.insert(job(f"q{i}"), 9)
    assert queue.insert(job("x"), 0) == 10 - 5


ops = st.lists(st.one_of(st.integers(-4, 4), st.just("pop")), max_size=150)


@settings(max_examples=200, deadline=None)
@given(ops=ops, p_max=st.integers(0, 6), multiplier=st.sampled_from([0.5, 1.0, 2.0]))
def test_enqueue_overtakes_boundedly_and_the_head_drains(
    ops: list[int | str], p_max: int, multiplier: float
) -> None:
    queue = ProportionalQueue(multiplier, p_max)
    immune: set[str] = set()  # requests with at least p_max requests behind them
    waited: dict[str, int] = {}  # dequeues since enqueue
    for n, op in enumerate(ops):
        before = ids(queue)
        if op == "pop":
            head = queue.pop_first(always)
            assert head is None or head.id == before[0], "dequeue must take the head"
            for i in waited:
                waited[i] += 1
            continue
        assert isinstance(op, int)
        queue.insert(job(f"r{n}"), op)
        after = ids(queue)
        new_at = after.index(f"r{n}")
        assert new_at >= len(before) - p_max, "jumped more than P_max places"
        overtaken = before[new_at:]
        assert after[new_at + 1 :] == overtaken  # everyone else moved back at most one place
        assert not immune & set(overtaken), "a request with P_max behind it was overtaken"
        waited[f"r{n}"] = 0
        immune |= {r for k, r in enumerate(after) if len(after) - 1 - k >= p_max}
    # With no more arrivals the head drains: each request leaves after those ahead of it.
    ahead = ids(queue)
    drained = [queue.pop_first(always) for _ in range(len(ahead))]
    assert [j.id for j in drained if j] == ahead and len(queue) == 0


def test_a_tail_request_waits_while_more_urgent_arrivals_keep_pace_with_dequeues() -> None:
    """The limit of Theorem 2: bounded jumps do not bound the wait of the last request.

    Each more-urgent arrival jumps over the one less urgent request at the tail (N_o = 1), so
    if one arrives per dequeue that request waits as long as the stream lasts (strict
    priority would do the same). Only requests with P_max others behind them are protected.
    """
    queue = ProportionalQueue(multiplier=1.0, p_max=32)
    queue.insert(job("patient"), 5)
    for i in range(100):
        queue.insert(job(f"urgent{i}"), 0)
        popped = queue.pop_first(always)
        assert popped is not None and popped.id == f"urgent{i}"
    assert ids(queue) == ["patient"]


# -- Algorithm 1 -------------------------------------------------------------------------
def test_credit_exchange_worked_example() -> None:
    ledger = Ledger()
    safi: dict[Node, float] = {("a",): 0.9, ("b",): 0.5, ("c",): 0.1, ("d",): 0.45}
    transfers = exchange_credits(ledger, safi, beta=0.1, scale=5.0, bound=100)
    # Sorted a(.9) b(.5) d(.45) c(.1): pair (a, c) Δ=.8 → R=4; pair (b, d) Δ=.05 < β: stop.
    assert [(t.taker, t.giver, t.amount) for t in transfers] == [(("a",), ("c",), 4)]
    a, c = ledger.account(("a",)), ledger.account(("c",))
    assert (a.credit, a.resource, c.credit, c.resource) == (-4, 4, 4, -4)


@settings(max_examples=200, deadline=None)
@given(
    rounds=st.lists(
        st.dictionaries(st.sampled_from("abcdefg"), st.floats(0, 1), min_size=0, max_size=7),
        max_size=30,
    ),
    bound=st.integers(1, 12),
    beta=st.sampled_from([0.05, 0.1, 0.3]),
)
def test_credit_exchange_conserves_and_bounds_credits(
    rounds: list[dict[str, float]], bound: int, beta: float
) -> None:
    ledger = Ledger()
    for safi in rounds:
        scores: dict[Node, float] = {(k,): v for k, v in safi.items()}
        for t in exchange_credits(ledger, scores, beta, 5.0, bound):
            assert t.amount > 0 and t.gap >= beta and safi[t.taker[0]] > safi[t.giver[0]]
        accounts = ledger.accounts().values()
        assert sum(a.credit for a in accounts) == 0
        assert sum(a.resource for a in accounts) == 0
        assert all(a.credit + a.resource == 0 for a in accounts)
        assert all(abs(a.credit) <= bound and abs(a.resource) <= bound for a in accounts)


# -- SAFI --------------------------------------------------------------------------------
def test_safi_combines_violation_rate_and_relative_usage() -> None:
    ledger = Ledger(window_s=60.0)
    ledger.charge_input(("a", "x", "y"), 100, 100.0, now=0.0)
    ledger.charge_input(("b", "x", "y"), 50, 50.0, now=0.0)
    for violated in (True, False, False, False):
        ledger.record_completion(("b", "x", "y"), violated, now=1.0)
    scores = safi_scores(ledger, [("a",), ("b",)], now=2.0, alpha=0.7)
    assert scores[("a",)] == pytest.approx(0.3 * 1.0)
    assert scores[("b",)] == pytest.approx(0.7 * 0.25 + 0.3 * 0.5)
    assert safi_scores(ledger, [("a",), ("b",)], now=100.0) == {("a",): 0.0, ("b",): 0.0}
    assert jain([1.0, 1.0]) == 1.0 and jain([1.0, 0.0]) == 0.5 and jain([]) == 1.0


# -- the policy in a service loop ----------------------------------------------------------
def stream(tenant: str, rate_gap: float, count: int, slo: Slo, n_in: int, out: int) -> list[Job]:
    return [
        Job(
            id=f"{tenant}{i}",
            tenant=tenant,
            arrival=i * rate_gap,
            n_in=n_in,
            max_tokens=out,
            seq=i * 2 + (tenant == "b"),
            slo=slo,
        )
        for i in range(count)
    ]


def test_credits_flow_to_the_client_that_violates_and_conservation_holds_every_round() -> None:
    ctx = PolicyContext(ledger=Ledger(window_s=20.0))
    policy = build_policy("exfairs", ctx, {"round_s": 1.0})
    assert isinstance(policy, ExfairsPolicy)
    jobs = stream("a", 0.1, 600, Slo(e2e_s=1.5), 20, 10) + stream("b", 0.1, 600, Slo(), 20, 10)
    checks: list[int] = []

    def invariant(loop: ServiceLoop) -> None:
        accounts = ctx.ledger.accounts().values()
        assert sum(a.credit for a in accounts) == 0 == sum(a.resource for a in accounts)
        assert all(abs(a.resource) <= 100 for a in accounts)
        checks.append(1)

    loop = ServiceLoop(policy, slots=2, kv_tokens=4096)
    loop.run(jobs, observe=invariant)
    assert len(loop.finished) == len(jobs)  # nothing starves in a finite run
    a, b = ctx.ledger.account(("a",)), ctx.ledger.account(("b",))
    assert a.resource > 0 > b.resource  # `a` misses its SLO and is compensated
    assert policy.priority(job("x", "a")) < policy.priority(job("y", "b"))
    snapshot = policy.snapshot()["state"]
    assert {tuple(c["node"]) for c in snapshot["clients"]} == {("a",), ("b",)}
    assert checks


def test_a_round_runs_every_round_s_and_only_over_active_clients() -> None:
    ctx = PolicyContext(ledger=Ledger(window_s=10.0))
    policy = build_policy("exfairs", ctx, {"round_s": 5.0})
    assert isinstance(policy, ExfairsPolicy)
    ctx.ledger.charge_input(("a", "x", "y"), 10, 10.0, now=0.0)
    ctx.ledger.record_completion(("a", "x", "y"), True, now=0.0)
    ctx.ledger.charge_input(("b", "x", "y"), 10, 10.0, now=0.0)
    policy.tick(0.0)
    assert not ctx.ledger.accounts()  # first tick only schedules the round
    policy.tick(4.9)
    assert not ctx.ledger.accounts()
    policy.tick(5.0)  # a: SAFI .7 + .3, b: .3 → R = round(5 · .7) = 4 (half up: 3.5 → 4)
    assert ctx.ledger.account(("a",)).resource == 4
    policy.push(job("late", "c"), 20.0)
    assert policy.active_clients(20.0) == [("c",)]  # a and b fell out of the window


def test_usage_raises_priority_in_the_paper_and_lowers_it_in_the_variant() -> None:
    def after_one_round(usage: str) -> tuple[int, int]:
        ctx = PolicyContext(ledger=Ledger(window_s=60.0))
        policy = build_policy("exfairs", ctx, {"round_s": 1.0, "usage": usage})
        ctx.ledger.charge_input(("heavy", "x", "y"), 9000, 9000.0, now=0.0)
        ctx.ledger.charge_input(("light", "x", "y"), 1000, 1000.0, now=0.0)
        for client in ("heavy", "light"):  # both violate alike: usage decides
            ctx.ledger.record_completion((client, "x", "y"), True, now=0.0)
        policy.tick(0.0)
        policy.tick(1.0)
        return policy.priority(job("h", "heavy")), policy.priority(job("l", "light"))

    heavy, light = after_one_round("raises")
    assert heavy < light  # the paper's rule: the heavy client gains priority (§4.5)
    heavy, light = after_one_round("lowers")
    assert light < heavy  # the variant: usage counts against priority
    ledger = Ledger(window_s=60.0)
    ledger.charge_input(("a", "x", "y"), 100, 100.0, now=0.0)
    lowered = safi_scores(ledger, [("a",), ("b",)], 1.0, alpha=0.5, usage_lowers=True)
    assert lowered == {("a",): 0.0, ("b",): 0.5}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["insert", "insert", "remove", "pop", "refuse"]),
            st.integers(-3, 3),
            st.integers(0, 2),
        ),
        max_size=150,
    )
)
def test_withdrawals_from_the_middle_keep_the_order_of_a_plain_list(
    steps: list[tuple[str, int, int]],
) -> None:
    """Marks and sweeps are invisible: the queue behaves as a list with deletions would."""
    queue = ProportionalQueue(multiplier=1.0, p_max=4, sweep_slack=1)
    model: list[tuple[Job, int]] = []  # the reference: a plain list, Algorithm 2 positions
    for n, (op, priority, pick) in enumerate(steps):
        if op == "insert":
            job = Job(
                id=f"j{n}", tenant="t", arrival=float(n), n_in=1, max_tokens=1, model=f"m{pick}"
            )
            position = queue.insert(job, priority)
            model.insert(position, (job, priority))
        elif op == "remove" and model:
            job, _ = model.pop(pick * 7 % len(model))
            assert queue.remove(job.id) is job
        elif op in ("pop", "refuse"):
            banned = f"m{pick}" if op == "refuse" else None
            expected = next((j for j, _ in model if j.model != banned), None)
            assert queue.pop_first(lambda j, banned=banned: j.model != banned) is expected  # type: ignore[misc]
            model = [(j, p) for j, p in model if j is not expected]
        assert list(queue) == model
        assert len(queue) == len(model)
