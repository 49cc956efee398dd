"""Request rows of multi-agent workflows for the program-level report tests, and the same
requests as the simulator's records, so the SQL report can be checked against
`control_plane.sim.program_metrics.workflow_metrics` number for number."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest

from control_plane.core.job import Slo
from control_plane.sim.program_metrics import workflow_metrics
from control_plane.sim.records import RequestRecord as SimRecord
from storage.records import RequestRecord

SINCE = 1_700_000_000.0
UNTIL = SINCE + 3600.0
APPS = (("acme", "chat"), ("acme", "docs"), ("globex", "chat"))
STATUSES = ("ok",) * 8 + ("error", "timeout")


def _call(
    rng: random.Random, key: tuple[str, str], workflow: str | None, i: int, arrival: float
) -> RequestRecord:
    status = rng.choice(STATUSES)
    latency = rng.uniform(0.05, 30.0)
    return RequestRecord(
        id=f"{key[0]}-{key[1]}-{workflow}-{i}",
        tenant=key[0],
        app=key[1],
        agent=rng.choice(("planner", "coder", "critic")),
        workflow=workflow,
        arrival=arrival,
        status=status,  # type: ignore[arg-type]
        finished_at=arrival + latency,
        n_in=rng.randint(10, 500),
        n_out=rng.choice((0, rng.randint(1, 800))) if status == "ok" else 0,
        e2e_ms=latency * 1000,
    )


def make_workflow_rows(n_workflows: int = 90, seed: int = 3) -> list[RequestRecord]:
    """Workflows of 1–6 calls in three applications (the same ids reused across apps), some
    starting before the period or after it, some running past its end, some with a failed
    call or one without a finish time; plus calls that belong to no workflow."""
    rng = random.Random(seed)
    rows: list[RequestRecord] = []
    for j in range(n_workflows):
        key = APPS[j % len(APPS)]
        start = SINCE + rng.uniform(-600.0, 3600.0 + 600.0)
        for i in range(rng.randint(1, 6)):
            rows.append(_call(rng, key, f"wf{j // 2}", i, start + i * rng.uniform(0.0, 900.0)))
    rows.append(_call(rng, APPS[0], None, 0, SINCE + 10.0))
    rows.append(_call(rng, APPS[1], None, 1, SINCE + 20.0))
    unfinished = next(r for r in rows if r.workflow and r.status == "ok" and r.arrival > SINCE)
    index = rows.index(unfinished)
    rows[index] = RequestRecord(**{**_fields(unfinished), "finished_at": None})
    return rows


def _fields(rec: RequestRecord) -> dict[str, Any]:
    return {name: getattr(rec, name) for name in rec.__dataclass_fields__}


def as_sim(rec: RequestRecord) -> SimRecord:
    """The same request as the simulator records it."""
    return SimRecord(
        id=rec.id,
        tenant=rec.tenant,
        app=rec.app,
        agent=rec.agent,
        model=rec.model,
        cls=None,
        arrival=rec.arrival,
        n_in=rec.n_in,
        max_tokens=max(rec.n_out, 1),
        slo=Slo(),
        status=rec.status,
        finished=rec.finished_at,
        n_out=rec.n_out,
        workflow=rec.workflow,
    )


def started_in(rows: Sequence[RequestRecord], since: float, until: float) -> list[RequestRecord]:
    """Every call of the workflows whose first call arrived in [since, until)."""
    first: dict[tuple[str, str, str | None], float] = defaultdict(lambda: float("inf"))
    for r in rows:
        key = (r.tenant, r.app, r.workflow)
        first[key] = min(first[key], r.arrival)
    return [r for r in rows if since <= first[(r.tenant, r.app, r.workflow)] < until]


def simulator_metrics(rows: Sequence[RequestRecord], since: float, until: float) -> Any:
    """What the simulator's program metrics say about the workflows started in the period."""
    return workflow_metrics([as_sim(r) for r in started_in(rows, since, until)])


def assert_same_as_simulator(data: Sequence[dict[str, Any]], expected: dict[str, Any]) -> None:
    """`data` (the report's per-application JSON) equals the simulator's figures."""
    assert [a["key"] for a in data] == list(expected)
    for app in data:
        sim = expected[app["key"]]
        assert app["workflows"] == sim["workflows"] and app["completed"] == sim["completed"]
        for name in ("calls_per_workflow", "e2e_s", "token_latency_s"):
            assert app[name] == pytest.approx(sim[name], rel=1e-12), (app["key"], name)
