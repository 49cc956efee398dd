"""The ledger: per-node service at every level, windows, counters, persistence."""

from __future__ import annotations

import json

import pytest

from control_plane.core.ledger import Ledger, group_of, prefixes
from control_plane.core.windows import SlidingWindow

PATH = ("t", "app", "agent")


def test_every_level_is_charged_and_parents_sum_their_children() -> None:
    ledger = Ledger()
    ledger.charge_input(PATH, 10, 10.0, now=0.0)
    ledger.charge_output(PATH, 5, 10.0, now=0.5)
    ledger.charge_input(("t", "app", "other"), 4, 8.0, now=1.0)
    ledger.charge_input(("u", "app", "agent"), 1, 1.0, now=1.0)
    assert ledger.service(("t", "app", "agent")) == 20.0
    assert ledger.service(("t", "app", "other")) == 8.0
    assert ledger.service(("t", "app")) == ledger.service(("t",)) == 28.0
    stats = ledger.stats(("t",))
    assert stats is not None and (stats.tokens_in, stats.tokens_out) == (14, 5)
    assert ledger.nodes_at(1) == [("t",), ("u",)]
    assert ledger.nodes_at(3) == [
        ("t", "app", "agent"),
        ("t", "app", "other"),
        ("u", "app", "agent"),
    ]
    assert list(prefixes(PATH)) == [("t",), ("t", "app"), PATH]


def test_slo_statistics_slide_with_the_window() -> None:
    ledger = Ledger(window_s=10.0, bucket_s=1.0)
    ledger.record_completion(PATH, True, now=0.2)
    ledger.record_completion(PATH, False, now=5.0)
    ledger.record_completion(PATH, False, now=9.5)
    window = ledger.window(("t",), now=9.9)
    assert (window.completed, window.violations) == (3, 1)
    assert window.violation_rate == pytest.approx(1 / 3)
    later = ledger.window(("t", "app"), now=11.0)  # the bucket [0, 1) has left the window
    assert (later.completed, later.violations, later.violation_rate) == (2, 0, 0.0)
    stats = ledger.stats(PATH)
    assert stats is not None and (stats.completed, stats.violations) == (3, 1)
    assert ledger.window(("nobody",), now=0.0).violation_rate == 0.0


def test_sliding_window_is_exact_to_one_bucket_and_accepts_late_amounts() -> None:
    window = SlidingWindow(window_s=3.0, bucket_s=1.0)
    for t in (0.0, 0.5, 1.0, 2.0, 2.9):
        window.add(t, 1.0)
    window.add(1.5, 10.0)  # late: lands in the newest bucket
    assert window.total(2.99) == 15.0
    assert window.total(4.0) == 13.0  # bucket [0, 1) ended at 1 ≤ 4 − 3
    assert window.total(100.0) == 0.0
    with pytest.raises(ValueError):
        SlidingWindow(0.0, 1.0)


def test_counters_lift_only_upwards_and_remember_who_left_last() -> None:
    ledger = Ledger()
    ledger.add_counter(("a",), 5.0)
    ledger.lift(("a",), 3.0)
    assert ledger.counter(("a",)) == 5.0
    ledger.lift(("b",), 4.0)
    assert ledger.counter(("b",)) == 4.0
    ledger.note_left(group_of(()), ("a",))
    assert ledger.last_left(group_of(())) == ("a",)
    assert ledger.last_left(group_of(("a",))) is None
    ledger.set_backlogged(("a",), True)
    ledger.set_backlogged(("a", "x"), True)
    ledger.reset_backlog([1], [("b",)])
    assert not ledger.is_backlogged(("a",))
    assert ledger.is_backlogged(("b",)) and ledger.is_backlogged(("a", "x"))


def test_a_held_counter_cell_reads_exactly_what_the_ledger_reads() -> None:
    ledger = Ledger()
    cell = ledger.counter_cell(("a",))  # as HMFS holds one per backlogged node
    assert cell.read() == 0.0 and not cell.known
    assert ledger.nodes_at(1) == [] and ledger.snapshot()["counters"] == []
    sink = ledger.counter_sink(("a",))
    for amount in (0.1, 0.2, 0.3):
        sink(amount)
    assert cell.pending == [0.1, 0.2, 0.3]  # deferred until read
    assert ledger.counter(("a",)) == (0.1 + 0.2) + 0.3 != 0.1 + (0.2 + 0.3)
    assert not cell.pending and cell.known and cell.value == ledger.counter(("a",))
    ledger.add_counter(("a",), 1.0)
    ledger.lift(("a",), 10.0)
    assert ledger.counter_cell(("a",)) is cell and cell.read() == 10.0
    assert ledger.snapshot()["counters"] == [[["a"], 10.0]]
    assert Ledger.from_snapshot(ledger.snapshot()).counter_cell(("a",)).read() == 10.0


def test_snapshot_round_trips_through_json() -> None:
    ledger = Ledger(window_s=30.0, bucket_s=0.5)
    ledger.charge_input(PATH, 10, 10.0, now=1.0)
    ledger.charge_output(PATH, 3, 6.0, now=2.0)
    ledger.record_completion(PATH, True, now=2.0)
    ledger.add_counter(("t",), 7.5)
    ledger.set_backlogged(("t",), True)
    ledger.note_left(group_of(()), ("t",))
    ledger.account(("t",)).credit = -3
    ledger.account(("t",)).resource = 3
    data = json.loads(json.dumps(ledger.snapshot()))
    again = Ledger.from_snapshot(data)
    assert again.snapshot() == data
    assert again.window(PATH, now=3.0) == ledger.window(PATH, now=3.0)
    assert again.counter(("t",)) == 7.5 and again.is_backlogged(("t",))
    assert again.last_left(group_of(())) == ("t",)
    assert again.find_account(("t",)) == ledger.find_account(("t",))
    assert again.find_account(("nobody",)) is None
