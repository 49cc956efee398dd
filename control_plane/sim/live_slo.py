"""SLO records for a live replay: the scheduler orders by what tenants' records say.

A request's `X-Arbiter-SLO-*` headers may only relax its tenant's recorded targets (see
`control_plane.gateway.tags`), so a replay that wants SLO-aware policies to see the scenario's
targets must first write them into the tenants' records — divided by the replay's speed, as the
headers are. A tenant whose requests do not all share one target per field gets no record for
that field (its requests then carry what the headers can only relax), and the caller is told.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

import httpx

from control_plane.sim.workload import RequestSpec

FIELDS = (("ttft_s", "slo_ttft_ms"), ("tpot_s", "slo_tpot_ms"), ("e2e_s", "slo_e2e_ms"))


def tenant_slos(
    specs: Iterable[RequestSpec], speed: float
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """`({tenant: {slo_*_ms: target}}, [notes])`: per tenant, each field whose requests all
    share one target (ms, divided by `speed`, at least 1 ms, rounded as the headers are)."""
    seen: dict[str, dict[str, set[float | None]]] = {}
    for spec in specs:
        fields = seen.setdefault(spec.tenant, {name: set() for _, name in FIELDS})
        for attr, name in FIELDS:
            value = getattr(spec.slo, attr)
            fields[name].add(None if value is None else max(1, round(value * 1000 / speed)))
    records: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for tenant, fields in sorted(seen.items()):
        for name, values in fields.items():
            if len(values) > 1:
                notes.append(f"{tenant}: requests differ in {name}; no record written")
            elif values and (only := next(iter(values))) is not None:
                records.setdefault(tenant, {})[name] = float(only)
    return records, notes


async def write_tenant_slos(
    gateway: str, admin_token: str, records: dict[str, dict[str, float]]
) -> None:
    """PATCH each tenant's SLO targets through the admin API (audited as `arbiter sim replay`)."""
    headers = {"Authorization": f"Bearer {admin_token}", "X-Arbiter-Actor": "arbiter sim replay"}
    async with httpx.AsyncClient(base_url=gateway.rstrip("/"), timeout=10.0) as client:
        missing = []  # every tenant checked before the first change: all written, or none
        for tenant in records:
            resp = await client.get(f"/admin/tenants/{quote(tenant, safe='')}", headers=headers)
            if resp.status_code == 404:
                missing.append(tenant)
            elif resp.status_code != 200:
                raise RuntimeError(
                    f"could not read tenant {tenant!r}: HTTP {resp.status_code} {resp.text[:200]}"
                )
        if missing:
            raise RuntimeError(f"the gateway has no tenant {', '.join(map(repr, missing))}")
        for tenant, fields in records.items():
            body = {**fields, "reason": "live replay: the scenario's SLO targets"}
            path = f"/admin/tenants/{quote(tenant, safe='')}"
            resp = await client.patch(path, json=body, headers=headers)
            if resp.status_code != 200:
                raise RuntimeError(
                    f"could not set SLO records of tenant {tenant!r}: "
                    f"HTTP {resp.status_code} {resp.text[:200]}"
                )
