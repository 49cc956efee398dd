"""Bisecting a refused batch: every good row is written, each bad row is found alone."""

from __future__ import annotations

import pytest

from control_plane.recorder.isolate import write_isolating
from storage.errors import RowsRejected, StorageUnavailable


class Table:
    """An in-memory table refusing negative values, one transaction per `write`."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.transactions = 0

    async def write(self, rows: list[int]) -> int:
        self.transactions += 1
        bad = [r for r in rows if r < 0]
        if bad:
            raise RowsRejected(f"negative: {bad[0]}")
        self.rows += rows
        return len(rows)


@pytest.mark.parametrize("bad_at", [[], [0], [99], [3, 4], [0, 50, 99], list(range(0, 100, 7))])
async def test_good_rows_are_written_and_bad_ones_isolated(bad_at: list[int]) -> None:
    values = [-(i + 1) if i in bad_at else i for i in range(100)]
    table = Table()
    written, refused = await write_isolating(
        [(f"e{i}", v) for i, v in enumerate(values)], table.write
    )
    assert sorted(table.rows) == sorted(v for v in values if v >= 0)
    assert written == 100 - len(bad_at)
    assert [entry_id for entry_id, _ in refused] == [f"e{i}" for i in bad_at]
    assert all(reason.startswith("negative") for _, reason in refused)
    assert table.transactions <= 1 + 2 * max(1, len(bad_at)) * 7  # O(k log n), not n


async def test_an_outage_propagates_without_deciding_anything() -> None:
    async def down(rows: list[int]) -> int:
        raise StorageUnavailable("connection refused")

    with pytest.raises(StorageUnavailable):
        await write_isolating([("e1", 1), ("e2", -1)], down)


async def test_nothing_to_write() -> None:
    table = Table()
    assert await write_isolating([], table.write) == (0, [])
    assert table.transactions == 0
