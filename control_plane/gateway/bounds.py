"""The bounds every number and name must respect at the door (tenant and admin APIs alike).

Rule: an integer fits the SQL column that stores it (INTEGER: signed 32-bit, BIGINT: signed
64-bit), a float is finite and inside a sane range, and a name matches `NAME_PATTERN` in full
(a trailing newline is not "the end"). Guarantee: a value that passes these types can be
stored, compared and summed without overflow; one that does not is refused with a 4xx naming
its field before anything is queued or written.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from storage.repos.fields import INT32_MAX as INT32_MAX  # one rule, here and in SQL
from storage.repos.fields import INT64_MAX as INT64_MAX
from storage.repos.fields import MAX_RATE as MAX_RATE
from storage.repos.fields import MAX_SLO_MS as MAX_SLO_MS
from storage.repos.fields import MAX_TIER as MAX_TIER
from storage.repos.fields import MAX_WEIGHT, MIN_WEIGHT
from storage.repos.fields import NAME_PATTERN as NAME_PATTERN  # one rule, here and in SQL
from storage.repos.fields import is_name as is_name

MAX_EPOCH_S = 1e11
"""Epoch seconds (around the year 5000): beyond it dates do not even print."""

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
Int32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
PositiveInt32 = Annotated[int, Field(strict=True, ge=1, le=INT32_MAX)]
Int64 = Annotated[int, Field(strict=True, ge=0, le=INT64_MAX)]
Tier = Annotated[int, Field(strict=True, ge=0, le=MAX_TIER)]
Millis = Annotated[float, Field(strict=True, gt=0, le=MAX_SLO_MS, allow_inf_nan=False)]
Weight = Annotated[float, Field(strict=True, ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)]
Epoch = Annotated[float, Field(ge=0, le=MAX_EPOCH_S, allow_inf_nan=False)]
Rate = Annotated[float, Field(strict=True, gt=0, le=MAX_RATE, allow_inf_nan=False)]
