"""`arbiter bench decisions`: what one scheduling decision costs with a deep backlog.

For every registered policy, a backlog of `jobs_per_leaf` requests on each of `leaves`
leaves (flat policies: that many tenants; `hmfs`: a tenant × application × agent tree of the
same number of leaves) is pushed, then `pops` decisions are made the way the scheduler makes
them: `pop`, then the dispatch charge of the job taken, a streamed-tokens charge of a running
job, and a new arrival on the leaf just served (so the backlog stays the same size). Every
push, pop and charge is timed alone with `perf_counter_ns`; the medians and 99th percentiles
are printed and written as JSON. Inputs are seeded, so two runs make the same decisions.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from control_plane.core.job import Job, Slo
from control_plane.core.policy import PolicyContext
from control_plane.policies.registry import build_policy, names

T = TypeVar("T")

HIERARCHICAL = frozenset({"hmfs"})
"""Policies whose leaves are agents of a tenant × application × agent tree."""
AGENT_ORDERED = frozenset({"kairos", "ayo"})
"""Policies that order agents: their leaves are agents of one application (Kairos's shape)."""


@dataclasses.dataclass(frozen=True)
class Size:
    """A backlog: `leaves` leaves with `jobs_per_leaf` queued requests each."""

    leaves: int
    jobs_per_leaf: int

    @property
    def queued(self) -> int:
        return self.leaves * self.jobs_per_leaf


def tree_shape(leaves: int) -> tuple[int, int, int]:
    """The tenant × application × agent shape of `leaves` leaves: 10 apps of 10 agents per
    tenant (10,000 → 100 × 10 × 10, 1,000 → 10 × 10 × 10); one agent per tenant below 100."""
    if leaves >= 100 and leaves % 100 == 0:
        return leaves // 100, 10, 10
    return leaves, 1, 1


def leaf_paths(policy: str, leaves: int) -> list[tuple[str, str, str]]:
    if policy in AGENT_ORDERED:
        return [("t0", "app", f"g{g}") for g in range(leaves)]
    if policy not in HIERARCHICAL:
        return [(f"t{i}", "app", "agent") for i in range(leaves)]
    tenants, apps, agents = tree_shape(leaves)
    return [
        (f"t{t}", f"a{a}", f"g{g}")
        for t in range(tenants)
        for a in range(apps)
        for g in range(agents)
    ]


class Arrivals:
    """Seeded jobs on given leaves: lengths, tiers and SLOs drawn as a mixed workload's."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self._seq = 0

    def job(self, path: tuple[str, str, str], now: float) -> Job:
        rng = self._rng
        self._seq += 1
        return Job(
            id=f"j{self._seq}",
            tenant=path[0],
            app=path[1],
            agent=path[2],
            arrival=now,
            seq=self._seq,
            n_in=rng.randint(32, 2048),
            max_tokens=rng.randint(16, 512),
            tier=rng.randint(0, 3),
            slo=Slo(ttft_s=rng.choice((0.5, 1.0, 2.0)), tpot_s=0.05),
        )


def _percentiles(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return {
        "p50_us": statistics.median(ordered) / 1000,
        "p99_us": p99 / 1000,
        "max_us": ordered[-1] / 1000,
        "n": len(ordered),
    }


def _timed(samples: list[int], call: Callable[..., T], *args: Any) -> T:
    start = time.perf_counter_ns()
    result = call(*args)
    samples.append(time.perf_counter_ns() - start)
    return result


def measure_policy(policy: str, size: Size, pops: int, seed: int = 7) -> dict[str, Any]:
    """Fill `policy` with `size`'s backlog, make `pops` decisions, return the timings."""
    impl = build_policy(policy, PolicyContext())
    paths = leaf_paths(policy, size.leaves)
    arrivals = Arrivals(seed)
    now = 0.0
    push_ns: list[int] = []
    for _ in range(size.jobs_per_leaf):
        for path in paths:
            now += 1e-5
            _timed(push_ns, impl.push, arrivals.job(path, now), now)
    pop_ns: list[int] = []
    charge_ns: list[int] = []
    running: list[Job] = []
    rng = random.Random(seed + 1)
    for _ in range(pops):
        now += 1e-3
        taken = _timed(pop_ns, impl.pop, now, _admit_all)
        if taken is None:
            raise RuntimeError(f"{policy}: pop returned None with {len(impl)} queued")
        _timed(charge_ns, impl.on_dispatch, taken, now)
        running.append(taken)
        _timed(charge_ns, impl.on_tokens, running[rng.randrange(len(running))], 16, now)
        if len(running) > 256:  # a pool's worth of slots: the oldest finishes
            running.pop(0)
        _timed(push_ns, impl.push, arrivals.job(taken.path, now), now)
        impl.tick(now)
    return {
        "policy": policy,
        "leaves": size.leaves,
        "queued": size.queued,
        "shape": list(tree_shape(size.leaves)) if policy in HIERARCHICAL else [size.leaves],
        "push": _percentiles(push_ns),
        "pop": _percentiles(pop_ns),
        "charge": _percentiles(charge_ns),
    }


def _admit_all(job: Job) -> bool:
    return True


def run(
    policies: list[str] | None, sizes: list[Size], pops: int, seed: int = 7
) -> Iterator[dict[str, Any]]:
    """`measure_policy` for every policy (all registered ones by default) at every size."""
    for size in sizes:
        for policy in policies or names():
            yield measure_policy(policy, size, pops, seed)


def write(rows: list[dict[str, Any]], out: Path | None) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"rows": rows}, indent=2))
