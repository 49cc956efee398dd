"""Params shared by the deadline-driven policies (EDF, LLF, two-lane)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DeadlineParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_deadline_s: float | None = Field(None, gt=0.0)
    """Relative deadline of a job without SLO targets; None = no deadline (served last)."""
