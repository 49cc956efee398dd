"""The gateway's door in the simulator: per-tenant queue caps, and live time constants."""

from __future__ import annotations

from control_plane.core.ledger import Ledger
from control_plane.settings import Settings
from control_plane.sim.records import RequestRecord
from control_plane.sim.scenario import SchedulerSpec, load_scenario
from tests.control_plane.sim.builders import run, tiny

CAP = 3


def queued_at(records: list[RequestRecord], t: float) -> int:
    """Requests of `records` that were in the queue when an arrival at `t` was judged."""
    return sum(
        1
        for r in records
        if r.status != "rejected"
        and r.arrival < t
        and (r.dispatched is None or r.dispatched >= t)
        and (r.status != "timeout" or (r.finished is not None and r.finished >= t))
    )


def test_a_full_queue_turns_arrivals_away_and_charges_nothing() -> None:
    scenario = tiny(
        duration_s=30,
        cluster=[{"profile": "llama3-8b-a100", "max_num_seqs": 2}],
        scheduler={"queue_cap": CAP},
        tenants=[{"name": "a"}, {"name": "b", "queue_cap": 10_000}],
    )
    result = run(scenario, "vtc")
    by = {t: [r for r in result.records if r.tenant == t] for t in ("a", "b")}
    rejected = [r for r in by["a"] if r.status == "rejected"]
    assert rejected, "the overload never filled a's queue"
    assert not any(r.status == "rejected" for r in by["b"])  # its own cap overrides
    for r in rejected:
        assert r.finished == r.arrival and r.dispatched is None and r.n_out == 0
        assert r.service() == 0.0
        assert queued_at(by["a"], r.arrival) >= CAP
    served = [r for r in by["a"] if r.status != "rejected"]
    assert max(queued_at(by["a"], r.arrival) for r in served) < CAP
    assert result.results["per_tenant"]["a"]["requests"] == len(by["a"])


def test_as_live_stretches_the_wall_clock_constants_only() -> None:
    scenario = load_scenario("noisy-neighbour-short")
    live = scenario.as_live(4.0)
    a, b = scenario.scheduler, live.scheduler
    assert b.tick_s == 4 * a.tick_s and b.progress_s == 4 * a.progress_s
    assert b.ledger_window_s == 4 * a.ledger_window_s
    assert a.queue_timeout_s is not None and b.queue_timeout_s == 4 * a.queue_timeout_s
    assert b.queue_cap == a.queue_cap == 256
    assert live.model_dump(exclude={"scheduler"}) == scenario.model_dump(exclude={"scheduler"})
    assert live.profile(live.cluster[0]) is scenario.profile(scenario.cluster[0])


def test_scheduler_defaults_are_the_live_stack_s() -> None:
    spec, settings = SchedulerSpec(), Settings()
    assert spec.tick_s == settings.tick_interval_s
    assert spec.progress_s == settings.progress_interval_s
    assert spec.queue_timeout_s == settings.queue_timeout_s
    assert spec.ledger_window_s == Ledger().window_s
    # the one deliberate difference: unbounded queues, as in the papers' experiments
    assert spec.queue_cap is None and settings.default_queue_cap == 256
    shipped = load_scenario("noisy-neighbour-short").scheduler.queue_cap
    assert shipped == settings.default_queue_cap
