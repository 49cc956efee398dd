"""Arrival processes of scenario streams: Poisson, Gamma (given CV), on/off, piecewise rates.

Each process turns a seeded `random.Random`, a horizon and a load scale into sorted arrival
times in `[start_s, min(stop_s, horizon))`. Rates are requests per second (`rate`) or per
minute (`rate_per_min`); `scale` multiplies every rate (the scenario's `load_scale`). CSV trace
replay lives in `traces.py`: it yields whole requests, not only times.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Rate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    rate: float | None = Field(None, ge=0)
    """Requests per second."""
    rate_per_min: float | None = Field(None, ge=0)
    """Requests per minute (the ExFairS paper's QPM); exclusive with `rate`."""

    @model_validator(mode="after")
    def _one_rate(self) -> _Rate:
        if (self.rate is None) == (self.rate_per_min is None):
            raise ValueError("give exactly one of rate (per second) and rate_per_min")
        return self

    @property
    def per_s(self) -> float:
        return self.rate if self.rate is not None else (self.rate_per_min or 0.0) / 60.0


class _Window(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    start_s: float = Field(0.0, ge=0)
    stop_s: float | None = Field(None, gt=0)

    def end(self, horizon: float) -> float:
        return horizon if self.stop_s is None else min(self.stop_s, horizon)


def _renewal(
    rng: random.Random, start: float, end: float, rate: float, cv: float
) -> Iterator[float]:
    """Renewal process with mean gap 1/rate and gap CV `cv` (1 = Poisson), from `start`."""
    if rate <= 0:
        return
    t = start
    shape = 1.0 / (cv * cv)
    while True:
        gap = rng.expovariate(rate) if cv == 1.0 else rng.gammavariate(shape, 1.0 / (rate * shape))
        t += gap
        if t >= end:
            return
        yield t


class Poisson(_Rate, _Window):
    """Exponential inter-arrival times."""

    process: Literal["poisson"] = "poisson"

    def times(self, rng: random.Random, horizon: float, scale: float) -> list[float]:
        return list(_renewal(rng, self.start_s, self.end(horizon), self.per_s * scale, 1.0))

    def mean_rate(self, horizon: float) -> float:
        return self.per_s


class Gamma(_Rate, _Window):
    """Gamma inter-arrival times with coefficient of variation `cv` (bursty when > 1)."""

    process: Literal["gamma"] = "gamma"
    cv: float = Field(gt=0)

    def times(self, rng: random.Random, horizon: float, scale: float) -> list[float]:
        return list(_renewal(rng, self.start_s, self.end(horizon), self.per_s * scale, self.cv))

    def mean_rate(self, horizon: float) -> float:
        return self.per_s


class OnOff(_Rate, _Window):
    """Alternating `on_s` seconds of Poisson (or Gamma, `cv`) arrivals and `off_s` of silence."""

    process: Literal["on_off"] = "on_off"
    on_s: float = Field(gt=0)
    off_s: float = Field(gt=0)
    first: Literal["on", "off"] = "on"
    cv: float = Field(1.0, gt=0)

    def times(self, rng: random.Random, horizon: float, scale: float) -> list[float]:
        out: list[float] = []
        t, end = self.start_s, self.end(horizon)
        on = self.first == "on"
        while t < end:
            length = self.on_s if on else self.off_s
            if on:
                out.extend(_renewal(rng, t, min(t + length, end), self.per_s * scale, self.cv))
            t += length
            on = not on
        return out

    def mean_rate(self, horizon: float) -> float:
        return self.per_s * self.on_s / (self.on_s + self.off_s)


class Phase(BaseModel):
    """`duration_s` seconds at `rate` (times the process's `unit_rate`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    duration_s: float = Field(gt=0)
    rate: float = Field(ge=0)


class Segment(BaseModel):
    """Until `until_s`: a constant `rate`, or `cycle` phases repeated from the segment start."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    until_s: float = Field(gt=0)
    rate: float | None = Field(None, ge=0)
    cycle: list[Phase] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one(self) -> Segment:
        if (self.rate is None) == (self.cycle is None):
            raise ValueError("a segment has exactly one of rate and cycle")
        return self

    def pieces(self, start: float) -> Iterator[tuple[float, float, float]]:
        """(from, to, rate) pieces covering `[start, until_s)`."""
        if self.rate is not None:
            yield start, self.until_s, self.rate
            return
        assert self.cycle is not None
        t = start
        while t < self.until_s:
            for phase in self.cycle:
                end = min(t + phase.duration_s, self.until_s)
                yield t, end, phase.rate
                t = end
                if t >= self.until_s:
                    return


class Piecewise(_Window):
    """Poisson arrivals at a piecewise-constant rate `unit_rate · rate(t)` (H-MAS eq. 13)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    process: Literal["piecewise"] = "piecewise"
    unit_rate: float = Field(1.0, gt=0)
    """Requests per second that a segment rate of 1 stands for (λ0 of H-MAS)."""
    segments: list[Segment] = Field(min_length=1)

    @model_validator(mode="after")
    def _increasing(self) -> Piecewise:
        ends = [s.until_s for s in self.segments]
        if ends != sorted(ends) or len(set(ends)) != len(ends):
            raise ValueError("segment until_s values must increase")
        return self

    def pieces(self) -> Iterator[tuple[float, float, float]]:
        start = 0.0
        for segment in self.segments:
            yield from segment.pieces(start)
            start = segment.until_s

    def times(self, rng: random.Random, horizon: float, scale: float) -> list[float]:
        out: list[float] = []
        lo, hi = self.start_s, self.end(horizon)
        for a, b, rate in self.pieces():
            a, b = max(a, lo), min(b, hi)
            if a < b:
                out.extend(_renewal(rng, a, b, rate * self.unit_rate * scale, 1.0))
        return out

    def mean_rate(self, horizon: float) -> float:
        end = min(horizon, self.segments[-1].until_s)
        total = sum((min(b, end) - a) * r for a, b, r in self.pieces() if a < end)
        return total * self.unit_rate / end if end > 0 else 0.0
