"""Settings: URLs and worker lists are checked at start; every problem is named as set."""

from __future__ import annotations

import pytest

from control_plane.settings import Settings, SettingsError, load_settings


def test_every_problem_is_one_line_naming_the_variable_or_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARBITER_LEASE_TTL_S", "soon")
    monkeypatch.setenv("ARBITER_WORKERS", "http://w1:8000|many")
    with pytest.raises(SettingsError) as caught:
        load_settings(redis_url="http://redis")
    assert caught.value.lines == [
        "--redis-url: expected redis://host:port/db, rediss://… or unix://…, got 'http://redis'",
        "ARBITER_WORKERS: 'http://w1:8000|many': max_num_seqs after '|' must be a positive integer",
        "ARBITER_LEASE_TTL_S: Input should be a valid number, unable to parse string as a "
        "number (got 'soon')",
    ]


def test_good_values_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARBITER_WORKERS", "http://w1:8000|64, https://w2")
    settings = load_settings(
        redis_url="unix:///run/redis.sock", database_url="postgresql+psycopg://a@b/c"
    )
    assert [w.max_num_seqs for w in settings.static_workers()] == [64, None]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("ARBITER_SCRAPE_INTERVAL_S", "-1", "greater than 0"),  # the leader scraped in a loop
        ("ARBITER_TICK_INTERVAL_S", "0", "greater than 0"),
        ("ARBITER_PROGRESS_INTERVAL_S", "0", "greater than 0"),
        ("ARBITER_CHECKPOINT_INTERVAL_S", "-0.5", "greater than 0"),
        ("ARBITER_QUEUE_TIMEOUT_S", "0", "greater than 0"),
        ("ARBITER_UPSTREAM_CONNECT_TIMEOUT_S", "-5", "greater than 0"),
        ("ARBITER_RECORDER_INTERVAL_S", "0", "greater than 0"),
        ("ARBITER_RECORDER_CLAIM_IDLE_S", "0", "greater than 0"),
        ("ARBITER_RECORDER_BATCH", "0", "greater than or equal to 1"),
        ("ARBITER_DEFAULT_QUEUE_CAP", "-3", "greater than or equal to 1"),
        ("ARBITER_DEFAULT_MAX_TOKENS", "0", "greater than or equal to 1"),
        ("ARBITER_MAX_BODY_BYTES", "10", "greater than or equal to 1024"),
        ("ARBITER_WORKER_FAILURE_COOLDOWN_S", "-1", "greater than or equal to 0"),
        ("ARBITER_PORT", "70000", "less than or equal to 65535"),
        ("ARBITER_SCHEDULER_PORT", "-1", "greater than or equal to 0"),
        ("ARBITER_RECORDER_METRICS_PORT", "65536", "less than or equal to 65535"),
        ("ARBITER_POLICY", "m:" + "P" * 199, "at most 200 characters"),  # its rows' column
        ("ARBITER_LOG_LEVEL", "trace", "expected one of DEBUG, INFO, WARNING, WARN, ERROR, CRI"),
    ],
)
def test_a_value_out_of_range_stops_the_process_with_one_line(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    """Before, these loaded: a process then ran with a negative interval (a busy loop), a
    port it could not bind, or a log level `logging` refuses with a traceback."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    (line,) = caught.value.lines
    assert line.startswith(f"{variable}: ") and message in line, line


def test_every_number_setting_has_a_bound() -> None:
    """A new int or float setting comes with its range (or is listed here with the reason)."""
    unbounded = []
    for name, field in Settings.model_fields.items():
        if field.annotation not in (int, float, int | None, float | None):
            continue
        bounds = [m for m in field.metadata if type(m).__name__ in {"Ge", "Gt", "Le", "Lt"}]
        if not bounds:
            unbounded.append(name)
    assert unbounded == []


@pytest.mark.parametrize("level", ["warning", "Debug", "WARN", "fatal", "NOTSET"])
def test_every_level_name_logging_knows_is_taken(
    monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    monkeypatch.setenv("ARBITER_LOG_LEVEL", level)
    assert load_settings().log_level == level.upper()
