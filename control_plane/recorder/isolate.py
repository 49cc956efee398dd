"""Finding the rows a database refuses inside a batch, so the rest of the batch is written."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from storage.errors import RowsRejected

Row = TypeVar("Row")
Write = Callable[[list[Row]], Awaitable[int]]


async def write_isolating(
    rows: Sequence[tuple[str, Row]], write: Write[Row]
) -> tuple[int, list[tuple[str, str]]]:
    """Write `rows` (entry id, row) with `write`, one transaction per call.

    When a write is refused (`RowsRejected`) the batch is split in halves and each is written
    again, down to single rows: the good rows are all written, in O(k log n) transactions for
    k refused rows. Returns (rows `write` reported inserted, [(entry id, reason)] of the rows
    refused on their own). Any other error (an outage) propagates: nothing is decided then.
    """
    if not rows:
        return 0, []
    try:
        return await write([row for _, row in rows]), []
    except RowsRejected as exc:
        if len(rows) == 1:
            return 0, [(rows[0][0], str(exc))]
    middle = len(rows) // 2
    first, refused_first = await write_isolating(rows[:middle], write)
    second, refused_second = await write_isolating(rows[middle:], write)
    return first + second, refused_first + refused_second
