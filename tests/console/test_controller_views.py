"""The controller's timeline on the policy page: rows and figure from the live view."""

from __future__ import annotations

from console.controller_views import switch_rows, timeline_figure

SWITCHES = [
    {"t": 100.0, "from": "fcfs", "to": "edf", "reason": "deadlines",
     "view": {"violation_rate": 0.6, "queued": 40}},
    {"t": 130.0, "from": "edf", "to": "fcfs", "reason": "rollback: violation rate > 1.5x",
     "view": {"violation_rate": 0.9, "queued": 55}},
]  # fmt: skip


def test_rows_and_the_figure_follow_the_switches() -> None:
    rows = switch_rows(SWITCHES)
    assert [(r["to"], r["violation_rate"], r["queued"]) for r in rows] == [
        ("edf", 0.6, 40),
        ("fcfs", 0.9, 55),
    ]
    fig = timeline_figure(SWITCHES)
    violation, queued = fig.data
    assert list(violation.x) == [0.0, 30.0] and list(violation.y) == [0.6, 0.9]
    assert list(violation.text) == ["→ edf", "→ fcfs"] and list(queued.y) == [40, 55]
    assert switch_rows([{"t": 1.0, "to": "sjf"}])[0]["violation_rate"] is None
