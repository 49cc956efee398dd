"""The controller's timeline on the policy page: rows and figure from the live view."""

from __future__ import annotations

import pandas as pd

from console.controller_views import (
    limits_line,
    llm_line,
    switch_frame,
    switch_rows,
    timeline_figure,
)

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


def test_limits_and_llm_lines_say_what_the_controller_holds() -> None:
    assert limits_line({}).startswith("Dispatch limits: none")
    assert limits_line({"limits": {"prefill_tokens": None, "n_run": None}}).endswith("allows).")
    line = limits_line({"limits": {"prefill_tokens": 4096, "n_run": 12, "token_budget": 0.8}})
    assert "4,096 prompt tokens in prefill" in line and "12 requests" in line and "80%" in line
    assert llm_line({"llm": None}) is None
    stats = {"asked": 5, "answered": 3, "invalid": 1, "timeout": 1}
    text = llm_line({"llm": {"model": "m", "stats": stats, "last_error": "not JSON"}})
    assert text is not None and "5 asked, 3 answered, 1 invalid, 1 timed out" in text
    assert "not JSON" in text


def test_the_switch_table_says_when_in_utc_not_as_an_epoch_number() -> None:
    """The leader stamps a switch with its epoch clock: the table showed `t` 1764460000.0."""
    frame = switch_frame([{**SWITCHES[0], "t": 1764460000.0}, {"t": None, "to": "sjf"}])
    assert list(frame.columns) == ["at (UTC)", "from", "to", "reason", "violation rate", "queued"]
    assert frame["at (UTC)"][0] == pd.Timestamp("2025-11-29 23:46:40", tz="UTC")
    assert pd.isna(frame["at (UTC)"][1]) and frame["to"][1] == "sjf"
    assert (frame["from"][0], frame["violation rate"][0], frame["queued"][0]) == ("fcfs", 0.6, 40)
