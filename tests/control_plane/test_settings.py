"""Settings: URLs and worker lists are checked at start; every problem is named as set."""

from __future__ import annotations

import pytest

from control_plane.settings import SettingsError, load_settings


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
