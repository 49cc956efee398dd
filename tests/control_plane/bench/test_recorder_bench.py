"""`arbiter bench recorder`: the real recorder over a private Redis records every event, and
the summary keeps each round beside the median; a round that cannot finish says why."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane.bench import recorder_bench
from control_plane.bench.recorder_bench import measure, summary
from control_plane.recorder.service import Recorder
from storage.db import Database


def test_each_round_records_every_event_and_is_metered() -> None:
    samples = measure([8, 64], events=300, rounds=2, catch_up_s=60)
    assert [(s.batch, s.events) for s in samples] == [(8, 300), (64, 300)] * 2
    assert all(s.cpu_s > 0 and s.wall_s >= 0 for s in samples)
    rows = summary(samples)
    assert [row["batch"] for row in rows] == [8, 64]
    for row in rows:
        per_event = sorted(r["cpu_us_per_event"] for r in row["rounds"])
        assert len(per_event) == 2
        assert row["cpu_us_per_event_median"] == sum(per_event) / 2


def test_a_taken_port_is_left_for_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        ports: Iterator[int] = iter([port, recorder_bench.free_port()])
        monkeypatch.setattr(recorder_bench, "free_port", lambda: next(ports))
        redis = recorder_bench._Redis(tmp_path)
        try:
            assert redis.port != port
            assert redis.proc.poll() is None
        finally:
            redis.stop()


def test_a_round_that_cannot_write_stops_and_says_why(tmp_path: Path) -> None:
    redis = recorder_bench._Redis(tmp_path)
    db = Database(f"sqlite:///{tmp_path / 'unmigrated.db'}")
    try:
        with pytest.raises(RuntimeError, match=r"left 20 of 20 .* no such table: requests"):
            asyncio.run(recorder_bench._round(redis.url, db, 8, 20, catch_up_s=2.0))
    finally:
        db.dispose()
        redis.stop()


@pytest.mark.timeout(120)
def test_a_round_ends_when_the_recorder_loses_a_cancellation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python 3.11's `wait_for` can drop a cancellation that meets a Redis reply; the recorder
    then runs on, and a round that only cancelled once would wait for it forever."""
    real_run = Recorder.run
    lost: list[bool] = []

    async def run_losing_one_cancel(self: Recorder) -> None:
        try:
            await real_run(self)
        except asyncio.CancelledError:
            lost.append(True)
            await real_run(self)  # as after a dropped cancellation: the loop runs on

    monkeypatch.setattr(Recorder, "run", run_losing_one_cancel)
    samples = measure([8], events=40, rounds=1, catch_up_s=60)
    assert lost == [True]
    assert [(s.batch, s.events) for s in samples] == [(8, 40)]
