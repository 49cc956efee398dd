"""Fairness rollups: per node, per time window, additive counters and latency histograms;
and the horizon before which one resolution was pruned."""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Double, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from storage.models.base import Base
from storage.models.tenancy import NAME_LEN


class FairnessRollup(Base):
    """Totals of the requests that arrived in `[bucket, bucket + window_s)` at one node.

    The key is (window_s, bucket, level, tenant, app, agent); `app` and `agent` are '' above
    their level. Every column is additive (histograms, in `LogHistogram`'s stored form, merge
    by adding counts), so rows are upserted by adding deltas, and any set of windows merges
    exactly into a report. A replaced request row's delta is subtracted (exact for counts and
    histograms); a row left counting no request is deleted.
    """

    __tablename__ = "fairness_rollups"
    __table_args__ = (
        CheckConstraint("level IN ('tenant', 'app', 'agent')", name="level"),
        CheckConstraint("window_s IN (60, 3600, 86400)", name="window"),
    )

    level: Mapped[str] = mapped_column(String(8), primary_key=True)
    window_s: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    tenant: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    app: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    agent: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    requests: Mapped[int] = mapped_column(Integer)
    ok: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    violations: Mapped[int] = mapped_column(Integer)
    n_in: Mapped[int] = mapped_column(BigInteger)
    n_out: Mapped[int] = mapped_column(BigInteger)
    unified_service: Mapped[float] = mapped_column(Double)
    n_ttft: Mapped[int] = mapped_column(Integer)
    sum_ttft_ms: Mapped[float] = mapped_column(Double)
    n_tpot: Mapped[int] = mapped_column(Integer)
    sum_tpot_ms: Mapped[float] = mapped_column(Double)
    n_e2e: Mapped[int] = mapped_column(Integer)
    sum_e2e_ms: Mapped[float] = mapped_column(Double)
    n_queue: Mapped[int] = mapped_column(Integer)
    sum_queue_ms: Mapped[float] = mapped_column(Double)
    ttft_hist: Mapped[bytes] = mapped_column(LargeBinary)
    tpot_hist: Mapped[bytes] = mapped_column(LargeBinary)
    e2e_hist: Mapped[bytes] = mapped_column(LargeBinary)


class RollupHorizon(Base):
    """The horizon of one rollup resolution: its rows with `bucket < horizon` may have been
    deleted (`arbiter prune-history --minute-rollups-older-than-days`), so reports read the
    coarser rows there.

    Rule: the horizon is written, in its own committed transaction, before any row under it
    is deleted, and it never moves back; it is aligned to the next coarser resolution (an
    hour for minutes), so the coarser rows cover the pruned period exactly. No row: nothing of
    that resolution was ever pruned.
    """

    __tablename__ = "rollup_horizons"
    __table_args__ = (CheckConstraint("window_s IN (60, 3600, 86400)", name="window"),)

    window_s: Mapped[int] = mapped_column(Integer, primary_key=True)
    horizon: Mapped[int] = mapped_column(BigInteger)
