"""Token-length distributions of scenario request classes (prompt and output lengths).

Every distribution draws from the `random.Random` it is given (never a global RNG), rounds to
an integer and clips to `[min, max]` (at least 1 token), so a seeded scenario always yields the
same lengths.
"""

from __future__ import annotations

import math
import random
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Length(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    min: int = Field(1, ge=1)
    max: int = Field(1_000_000, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> _Length:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self

    def clip(self, value: float) -> int:
        return max(self.min, min(self.max, round(value)))

    def sample(self, rng: random.Random) -> int:
        raise NotImplementedError

    def mean(self) -> float:
        """Mean before clipping (what capacity estimates use)."""
        raise NotImplementedError


class Fixed(_Length):
    """Always `value` tokens."""

    dist: Literal["fixed"] = "fixed"
    value: int = Field(ge=1)

    def sample(self, rng: random.Random) -> int:
        return self.clip(self.value)

    def mean(self) -> float:
        return float(self.value)


class Uniform(_Length):
    """An integer uniformly in `[low, high]`."""

    dist: Literal["uniform"] = "uniform"
    low: int = Field(ge=1)
    high: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.high < self.low:
            raise ValueError("uniform: high must be >= low")
        return self

    def sample(self, rng: random.Random) -> int:
        return self.clip(rng.randint(self.low, self.high))

    def mean(self) -> float:
        return (self.low + self.high) / 2.0


class Normal(_Length):
    """Normal with `mean` and `std`, rounded and clipped."""

    dist: Literal["normal"] = "normal"
    mu: float = Field(alias="mean", gt=0)
    std: float = Field(ge=0)

    def sample(self, rng: random.Random) -> int:
        return self.clip(rng.gauss(self.mu, self.std))

    def mean(self) -> float:
        return self.mu


class LogNormal(_Length):
    """Log-normal whose *mean* is `mean` tokens and whose log has standard deviation `sigma`."""

    dist: Literal["lognormal"] = "lognormal"
    mu: float = Field(alias="mean", gt=0)
    sigma: float = Field(ge=0)

    def sample(self, rng: random.Random) -> int:
        if self.sigma == 0:
            return self.clip(self.mu)
        log_mu = math.log(self.mu) - self.sigma * self.sigma / 2.0
        return self.clip(math.exp(rng.gauss(log_mu, self.sigma)))

    def mean(self) -> float:
        return self.mu


class Empirical(_Length):
    """One of `values`, uniformly (repeat a value to weight it)."""

    dist: Literal["empirical"] = "empirical"
    values: list[int] = Field(min_length=1)

    def sample(self, rng: random.Random) -> int:
        return self.clip(self.values[rng.randrange(len(self.values))])

    def mean(self) -> float:
        return sum(self.values) / len(self.values)


LengthDist = Annotated[
    Fixed | Uniform | Normal | LogNormal | Empirical, Field(discriminator="dist")
]
