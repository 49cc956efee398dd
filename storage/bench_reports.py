"""Benchmark: 30-day fairness reports over a million request rows, from the rollups.

    python -m storage.bench_reports --url sqlite:///./bench.db --rows 1000000 --days 30
    python -m storage.bench_reports --url postgresql+psycopg://postgres@127.0.0.1/bench ...

Fills an empty database (see `storage.bench_data`), then times, with fresh sessions, a report
over the last 30 days (ending now, not aligned to a day) at tenant level, at agent level, and
at agent level for one tenant, each `--repeat` times; prints the times and writes JSON. With
`--raw` it also times the tenant report computed straight from the request rows and checks
that both give the same request counts. `--reuse` times an already filled database again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import func, select, text

from storage.bench_data import (
    REQUEST_TABLE,
    ROLLUP_TABLE,
    Shape,
    bulk_insert,
    generate_span,
    request_rows,
    rollup_rows,
)
from storage.db import Database
from storage.reports import Report
from storage.repos import report_from_requests

DAY = 86_400


def day_spans(start: float, end: float) -> list[tuple[float, float]]:
    """[start, end) cut at UTC midnights."""
    cuts = [start, *range((int(start) // DAY + 1) * DAY, int(end), DAY)]
    if cuts[-1] >= end:
        cuts.pop()
    return list(zip(cuts, [*cuts[1:], end], strict=True))


def fill(
    db: Database, *, rows: int, days: int, shape: Shape, seed: int, end: float
) -> dict[str, float]:
    """Generate and load `rows` requests arriving in [end - days, end); → timings."""
    rng = np.random.default_rng(seed)
    spans = day_spans(end - days * DAY, end)
    lengths = np.array([b - a for a, b in spans])
    per_day = np.floor(rows * lengths / lengths.sum()).astype(np.int64)
    per_day[: rows - int(per_day.sum())] += 1
    spent = {"generate_s": 0.0, "requests_s": 0.0, "rollups_s": 0.0}
    next_id = 0
    for day, ((a, b), n) in enumerate(zip(spans, per_day.tolist(), strict=True)):
        t0 = time.perf_counter()
        records = generate_span(rng, start=a, end=b, n=n, shape=shape, first_id=next_id)
        next_id += n
        t1 = time.perf_counter()
        bulk_insert(db.engine, REQUEST_TABLE, request_rows(records))
        t2 = time.perf_counter()
        bulk_insert(db.engine, ROLLUP_TABLE, rollup_rows(records))
        t3 = time.perf_counter()
        spent["generate_s"] += t1 - t0
        spent["requests_s"] += t2 - t1
        spent["rollups_s"] += t3 - t2
        print(f"  day {day + 1}/{len(spans)}: {n} requests ({t3 - t0:.1f} s)", flush=True)
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    return spent


def timed(fn: Callable[[], Report], repeat: int) -> tuple[dict[str, Any], Report]:
    """Run `fn` `repeat` times; → timing summary and the last report."""
    runs, report = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        report = fn()
        runs.append(time.perf_counter() - began)
    assert report is not None
    summary = {
        "median_s": statistics.median(runs),
        "min_s": min(runs),
        "runs_s": runs,
        "nodes": len(report.nodes),
        "requests": sum(n.requests for n in report.nodes),
    }
    return summary, report


def run_reports(db: Database, *, end: float, days: int, repeat: int, raw: bool) -> dict[str, Any]:
    """Time the reports over [end - days, end)."""
    start = end - days * DAY
    with db.reader() as r:
        tenant = r.requests.list(limit=1)[0].tenant if r.requests.count() else "tenant-00"
    cases: dict[str, Callable[[], Report]] = {
        "tenant": lambda: _rollup_report(db, start, end, "tenant", None),
        "agent": lambda: _rollup_report(db, start, end, "agent", None),
        "agent_one_tenant": lambda: _rollup_report(db, start, end, "agent", tenant),
    }
    results: dict[str, Any] = {}
    reports: dict[str, Report] = {}
    for name, fn in cases.items():
        results[name], reports[name] = timed(fn, repeat)
        print(
            f"  {name:>17}: median {results[name]['median_s'] * 1000:8.1f} ms "
            f"over {results[name]['nodes']} nodes",
            flush=True,
        )
    if raw:
        results["tenant_from_requests"], exact = timed(lambda: _raw_report(db, start, end), 1)
        assert [n.requests for n in exact.nodes] == [n.requests for n in reports["tenant"].nodes]
        print(
            f"  tenant from rows : {results['tenant_from_requests']['median_s']:.2f} s "
            "(same request counts as the rollups)",
            flush=True,
        )
    return results


def _rollup_report(
    db: Database, start: float, end: float, level: Any, tenant: str | None
) -> Report:
    with db.reader() as r:
        return r.rollups.report(start=start, end=end, level=level, tenant=tenant)


def _raw_report(db: Database, start: float, end: float) -> Report:
    with db.reader() as r:
        return report_from_requests(r.session, start=start, end=end, level="tenant", max_rows=None)


def _count(db: Database, table: Any) -> int:
    with db.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry point; → the JSON written."""
    args = _parser().parse_args(argv)
    db = Database(args.url)
    db.migrate()
    shape = Shape(tenants=args.tenants, apps=args.apps, agents=args.agents)
    end = float(args.end or time.time())
    existing = _count(db, REQUEST_TABLE)
    load: dict[str, float] = {}
    if existing and not args.reuse:
        raise SystemExit(
            f"the database already holds {existing} requests: use --reuse or an empty one"
        )
    if not args.reuse:
        print(f"filling {db.dialect} with {args.rows} requests over {args.days} days …", flush=True)
        began = time.perf_counter()
        load = fill(db, rows=args.rows, days=args.days, shape=shape, seed=args.seed, end=end)
        load["total_s"] = time.perf_counter() - began
    else:
        end = float(_latest_arrival(db))
    print(f"timing {args.days}-day reports ({args.repeat} runs each) …", flush=True)
    result = {
        "dialect": db.dialect,
        "rows": _count(db, REQUEST_TABLE),
        "rollup_rows": _count(db, ROLLUP_TABLE),
        "days": args.days,
        "shape": {"tenants": shape.tenants, "apps": shape.apps, "agents": shape.agents},
        "load": load,
        "reports": run_reports(db, end=end, days=args.days, repeat=args.repeat, raw=args.raw),
    }
    out = Path(args.out or f"bench_reports-{db.dialect}.json")
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    db.dispose()
    return result


def _latest_arrival(db: Database) -> float:
    with db.engine.connect() as conn:
        return float(conn.execute(select(func.max(REQUEST_TABLE.c.arrival))).scalar_one()) + 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m storage.bench_reports", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--url", required=True, help="database URL (SQLite file or PostgreSQL)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--apps", type=int, default=3, help="applications per tenant")
    parser.add_argument("--agents", type=int, default=4, help="agents per application")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--end", type=float, default=None, help="epoch end of the data (default now)"
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--raw",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the tenant report straight from the request rows",
    )
    parser.add_argument("--reuse", action="store_true", help="time an already filled database")
    parser.add_argument(
        "--out", default=None, help="JSON output (default bench_reports-<dialect>.json)"
    )
    return parser


if __name__ == "__main__":
    main()
