"""One fault scenario against one `arbiter up`: streamed load, a fault mid-run, the accounting.

The load is `requests` streamed chat completions from two tenants through `concurrency`
clients (the real `openai` client). Once `inject_at` of them have ended, the fault is
injected; from that moment a third tenant, `probe`, sends short requests until one succeeds
(time to recover). After the load, a final check sends one streamed and one non-streamed
request per tenant. Then every request a client saw succeed must have exactly one SQL row
(status ok, the same token count): `lost` and `duplicated` count the exceptions.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from control_plane.bench.chat_client import HUNG, INCOMPLETE, Outcome, chat, client_for
from control_plane.bench.faults import Fault
from control_plane.bench.off_loop import off_loop
from control_plane.bench.up_process import UpProcess
from storage.db import Database
from storage.records import RequestRecord


@dataclass(frozen=True)
class Scenario:
    """The load and the bounds of one fault run (defaults: the issue's scenario)."""

    requests: int = 200
    concurrency: int = 32
    tenants: tuple[str, ...] = ("acme", "globex")
    max_tokens: int = 48
    bound_s: float = 60.0
    """A request with no end after this long is `hung`."""
    inject_at: float = 0.3
    recover_bound_s: float = 45.0
    probe_interval_s: float = 0.25
    rows_wait_s: float = 45.0


@dataclass
class FaultResult:
    """What one fault run measured (JSON-ready with `asdict`)."""

    fault: str
    injected: str = ""
    sent: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    errors_before_fault: int = 0
    """Explicit errors of load requests that ended before the fault (a baseline)."""
    hung: int = 0
    incomplete: int = 0
    rows_expected: int = 0
    lost: int = 0
    duplicated: int = 0
    mismatched: int = 0
    errors_without_row: int = 0
    recovered: bool = False
    recovery_s: float | None = None
    probes: dict[str, int] = field(default_factory=dict)
    final_check: list[str] = field(default_factory=list)
    restarts: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    injected_after_s: float = 0.0
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


async def _load(up: UpProcess, sc: Scenario, inject: asyncio.Event, out: list[Outcome]) -> None:
    keys = up.keys()
    clients = {t: client_for(up.gateway, keys[t], sc.bound_s) for t in sc.tenants}
    order = [sc.tenants[i % len(sc.tenants)] for i in range(sc.requests)]
    threshold = max(1, int(sc.inject_at * sc.requests))

    async def worker() -> None:
        while order:
            tenant = order.pop()
            out.append(
                await chat(clients[tenant], tenant, max_tokens=sc.max_tokens, bound_s=sc.bound_s)
            )
            if len(out) >= threshold:
                inject.set()

    try:
        await asyncio.gather(*(worker() for _ in range(sc.concurrency)))
    finally:
        inject.set()
        for c in clients.values():
            await c.close()


async def _probe(up: UpProcess, sc: Scenario, t0: float, out: list[Outcome]) -> float | None:
    """Probe until a request succeeds; seconds from `t0` to that success, or None."""
    client = client_for(up.gateway, up.keys()["probe"], sc.bound_s)
    pending: set[asyncio.Task[Outcome]] = set()
    recovered: float | None = None
    next_at = t0
    try:
        while recovered is None and time.monotonic() - t0 < sc.recover_bound_s:
            if len(pending) < 4 and time.monotonic() >= next_at:
                pending.add(asyncio.create_task(chat(client, "probe", max_tokens=4, bound_s=20)))
                next_at = time.monotonic() + sc.probe_interval_s
            wait_s = max(0.01, next_at - time.monotonic())
            if not pending:
                await asyncio.sleep(wait_s)
                continue
            done, pending = await asyncio.wait(
                pending, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                o = task.result()
                out.append(o)
                if o.ok and recovered is None:
                    recovered = o.ended - t0
        out.extend(await asyncio.gather(*pending))
    finally:
        await client.close()
    return recovered


async def _final_check(up: UpProcess, sc: Scenario, out: list[Outcome]) -> list[str]:
    keys = up.keys()
    kinds = []
    for tenant in sc.tenants:
        client = client_for(up.gateway, keys[tenant], 20)
        for stream in (True, False):
            o = await chat(client, tenant, max_tokens=4, bound_s=20, stream=stream)
            out.append(o)
            kinds.append(o.kind)
        await client.close()
    return kinds


def _rows(db_url: str, ids: set[str], wait_s: float) -> list[RequestRecord]:
    """Every request row, once all of `ids` have one (or after `wait_s`)."""
    db = Database(db_url)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            with db.reader() as r:
                rows = r.requests.list(limit=1_000_000)
            if ids <= {row.id for row in rows} or time.monotonic() > deadline:
                return rows
            time.sleep(0.5)
    finally:
        db.dispose()


def account(
    result: FaultResult, load: list[Outcome], others: list[Outcome], rows: list[RequestRecord]
) -> None:
    """Fill in the load's counts (`sent`, `ok`, `errors`), the silent failures of every request
    (load, probes, final check) and the rows-vs-results checks."""
    everything = [*load, *others]
    kinds = collections.Counter(o.kind for o in load)
    result.sent = len(load)
    result.ok = kinds.pop("ok", 0)
    kinds.pop(HUNG, None)
    kinds.pop(INCOMPLETE, None)
    result.errors = dict(sorted(kinds.items()))
    result.hung = sum(1 for o in everything if o.kind == HUNG)
    result.incomplete = sum(1 for o in everything if o.kind == INCOMPLETE)
    row_of = {row.id: row for row in rows}
    per_row = collections.Counter(row.id for row in rows)
    per_client = collections.Counter(o.request_id for o in everything if o.request_id)
    oks = [o for o in everything if o.ok]
    result.rows_expected = len(oks)
    result.lost = sum(1 for o in oks if o.request_id not in row_of)
    result.duplicated = sum(n - 1 for n in per_row.values()) + sum(
        n - 1 for n in per_client.values()
    )
    result.mismatched = sum(1 for o in oks if _differs(o, row_of.get(o.request_id or "")))
    result.errors_without_row = sum(
        1 for o in everything if o.explicit_error and o.request_id and o.request_id not in row_of
    )


def _differs(o: Outcome, row: RequestRecord | None) -> bool:
    return row is not None and (row.status != "ok" or row.n_out != o.tokens)


async def run_fault(up: UpProcess, fault: Fault, sc: Scenario) -> FaultResult:
    """Drive the scenario, inject `fault` mid-run, and account for every request."""
    result = FaultResult(fault.name)
    load_out: list[Outcome] = []
    other: list[Outcome] = []
    inject = asyncio.Event()
    started = time.monotonic()
    load = asyncio.create_task(_load(up, sc, inject, load_out))
    await inject.wait()
    t0 = time.monotonic()
    result.injected_after_s = round(t0 - started, 2)
    injecting = asyncio.create_task(fault.inject(up))
    recovery = await _probe(up, sc, t0, other)
    await load
    try:
        result.injected = await injecting
    except Exception as exc:  # the table must say why a fault could not be injected
        result.problem = f"injection failed: {exc}"
    result.wall_s = round(time.monotonic() - started, 2)
    result.final_check = await _final_check(up, sc, other)
    oks = {o.request_id for o in [*load_out, *other] if o.ok and o.request_id}
    rows = await off_loop(_rows, str(up.info["database_url"]), oks, sc.rows_wait_s)
    account(result, load_out, other, rows)
    result.errors_before_fault = sum(1 for o in load_out if o.explicit_error and o.ended < t0)
    result.probes = dict(collections.Counter(o.kind for o in other))
    result.recovery_s = None if recovery is None else round(recovery, 2)
    result.recovered = recovery is not None and all(k == "ok" for k in result.final_check)
    up.reload()
    children = up.info.get("children") or {}
    result.restarts = {
        str(k): int(v.get("restarts", 0))
        for k, v in (children.items() if isinstance(children, dict) else [])
        if isinstance(v, dict) and v.get("restarts")
    }
    return result
