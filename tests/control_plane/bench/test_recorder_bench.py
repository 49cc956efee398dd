"""`arbiter bench recorder`: the real recorder over a private Redis records every event, and
the summary keeps each round beside the median."""

from __future__ import annotations

from control_plane.bench.recorder_bench import measure, summary


def test_each_round_records_every_event_and_is_metered() -> None:
    samples = measure([8, 64], events=300, rounds=2)
    assert [(s.batch, s.events) for s in samples] == [(8, 300), (64, 300)] * 2
    assert all(s.cpu_s > 0 and s.wall_s >= 0 for s in samples)
    rows = summary(samples)
    assert [row["batch"] for row in rows] == [8, 64]
    for row in rows:
        per_event = sorted(r["cpu_us_per_event"] for r in row["rounds"])
        assert len(per_event) == 2
        assert row["cpu_us_per_event_median"] == sum(per_event) / 2
