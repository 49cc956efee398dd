"""Where each rollup resolution's pruned period ends (`RollupHorizon`): read by reports,
raised by `storage.retention.prune_minute_rollups` before it deletes."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from storage.dialects import insert_new
from storage.models import RollupHorizon, table_of

_TABLE = table_of(RollupHorizon)


def horizon_of(session: Session, window_s: int) -> int | None:
    """The horizon of resolution `window_s` (its rows before it may be gone), or None when none
    of its rows was ever pruned."""
    value = session.execute(
        select(_TABLE.c.horizon).where(_TABLE.c.window_s == window_s)
    ).scalar_one_or_none()
    return None if value is None else int(value)


def raise_horizon(session: Session, window_s: int, horizon: int) -> int:
    """Move the horizon of `window_s` to `horizon` unless it already lies later (it never moves
    back, also under concurrent callers); → the horizon now stored."""
    created = insert_new(session, _TABLE, [{"window_s": window_s, "horizon": horizon}])
    if not created:
        session.execute(
            update(_TABLE)
            .where(_TABLE.c.window_s == window_s, _TABLE.c.horizon < horizon)
            .values(horizon=horizon)
        )
    stored = horizon_of(session, window_s)
    assert stored is not None
    return stored
