"""Replay a scenario live through a gateway's OpenAI API and record what clients saw.

Each request of the scenario's workload is sent at `arrival / speed` seconds after the start,
in the shape its model's kind calls for (`live_shapes`: a text request is a streamed
`/v1/completions` call; a VLM's carries real images, an image model's is an image generation)
with the tenant's API key, `X-Arbiter-App/Agent/Task`
and SLO headers (targets divided by `speed`), a token-id prompt of exactly `n_in` tokens,
the client's cap as `max_tokens` (what the scheduler sees, as in the simulator) and the
scenario's true length as `min_tokens`, on which the simulated worker ends its answer with EOS
(`workers.sim.outputs`). The control plane never reads `min_tokens`: it only forwards the body
(a real vLLM worker treats it as a floor and may write on to `max_tokens`). Client-side times
are mapped back to scenario time (multiplied by `speed`), and the dispatch time comes from
the `X-Arbiter-Queue-Ms` response header, so the records — and the metrics computed from
them — are comparable with a simulation of the same
scenario whose workers run `speed` times slower than the live simulated workers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from control_plane.core.cli_errors import OptionError
from control_plane.sim.live_shapes import request_shape
from control_plane.sim.records import RequestRecord
from control_plane.sim.workload import RequestSpec
from workers.engine.profile import ModelInfo

_FAILED = {429: "rejected", 504: "timeout"}
"""Refusals with a record status of their own: a door limit's 429 (queue cap, rate limit, token
budget: never queued, as the simulator's `queue_cap`) and the queue timeout's 504."""


@dataclass(frozen=True)
class LiveTarget:
    gateway: str
    keys: Mapping[str, str]
    """Tenant → API key; the key `"*"` serves every tenant without its own."""
    speed: float = 1.0
    timeout_s: float = 600.0
    models: Mapping[str, str] = field(default_factory=dict)
    """Scenario model name → the name the gateway serves it under (default: the same)."""
    infos: Mapping[str, ModelInfo] = field(default_factory=dict)
    """Scenario model name → its profile's model (its kind picks the request's shape,
    `live_shapes`); a model not here is sent as text."""

    def key_for(self, tenant: str) -> str:
        key = self.keys.get(tenant) or self.keys.get("*")
        if key is None:
            raise ValueError(f"no API key for tenant {tenant!r}")
        return key


def _keys_document(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise OptionError(f"--keys-file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise OptionError(f"--keys-file {path}: a JSON object like .arbiter/up.json is needed")
    return data


def load_keys(path: Path) -> tuple[str | None, dict[str, str]]:
    """`(gateway_url, {tenant: key})` from a file like `.arbiter/up.json`."""
    data = _keys_document(path)
    tenants = data.get("tenants") or {}
    if not isinstance(tenants, dict):
        raise OptionError(f"--keys-file {path}: `tenants` must map tenant names to API keys")
    url = data.get("gateway_url")
    return (str(url) if url else None), {str(k): str(v) for k, v in tenants.items()}


def load_admin_token(path: Path) -> str | None:
    """The admin token of a file like `.arbiter/up.json`, if it has one."""
    token = _keys_document(path).get("admin_token")
    return str(token) if token else None


def missing_keys(tenants: Iterable[str], keys: Mapping[str, str]) -> list[str]:
    """The tenants among `tenants` that no key of `keys` (nor a `*` key) serves."""
    return [] if "*" in keys else sorted(set(tenants) - set(keys))


def request_headers(spec: RequestSpec, key: str, speed: float) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {key}",
        "X-Arbiter-App": spec.app,
        "X-Arbiter-Agent": spec.agent,
    }
    for name, tag in (
        ("Task", spec.task),
        ("Workflow", spec.workflow),
        ("Upstream", spec.upstream),
    ):
        if tag:
            headers[f"X-Arbiter-{name}"] = tag
    for name, value in (
        ("TTFT", spec.slo.ttft_s),
        ("TPOT", spec.slo.tpot_s),
        ("E2E", spec.slo.e2e_s),
    ):
        if value is not None:
            headers[f"X-Arbiter-SLO-{name}-Ms"] = str(max(1, round(value * 1000 / speed)))
    return headers


async def _stream(
    client: httpx.AsyncClient,
    spec: RequestSpec,
    record: RequestRecord,
    target: LiveTarget,
    clock: Callable[[], float],
) -> str | None:
    """Send one request and fill its record; why it failed (None: it did not)."""
    served = target.models.get(spec.model) or spec.model
    path, body = request_shape(spec, served, target.infos.get(spec.model))
    url = target.gateway.rstrip("/") + path
    headers = request_headers(spec, target.key_for(spec.tenant), target.speed)
    async with client.stream("POST", url, json=body, headers=headers) as resp:
        queue_ms = resp.headers.get("x-arbiter-queue-ms")
        if queue_ms is not None:
            record.dispatched = record.arrival + float(queue_ms) / 1000.0 * target.speed
        if resp.status_code != 200:
            await resp.aread()
            record.status = _FAILED.get(resp.status_code, "error")
            record.finished = clock()
            return f"HTTP {resp.status_code} {_error_code(resp)}".rstrip()
        if body.get("stream"):
            await _read_stream(resp, record, clock)
        else:
            usage = json.loads(await resp.aread()).get("usage") or {}
            record.first_token = clock()
            record.n_out = int(usage.get("output_tokens") or 0)
    record.finished = clock()
    if record.status == "queued":
        record.status = "ok"
    if record.dispatched is None:
        record.dispatched = record.first_token or record.finished
    return "error event in the stream" if record.status == "error" else None


def _error_code(resp: httpx.Response) -> str:
    """The OpenAI-shaped error's `code` of a refused request, else its `type` (vLLM's code is
    the HTTP status again), else nothing."""
    try:
        error = resp.json().get("error")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    code = error.get("code")
    return code if isinstance(code, str) and code else str(error.get("type") or "")


async def _read_stream(
    resp: httpx.Response, record: RequestRecord, clock: Callable[[], float]
) -> None:
    async for line in resp.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        chunk = json.loads(payload)
        if "error" in chunk:
            record.status = "error"
            break
        if any(_has_text(c) for c in chunk.get("choices") or []):
            if record.first_token is None:
                record.first_token = clock()
            record.n_out += 1
        usage = chunk.get("usage")
        if usage and usage.get("completion_tokens") is not None:
            record.n_out = int(usage["completion_tokens"])


def _has_text(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    return bool(choice.get("text") or (isinstance(delta, dict) and delta.get("content")))


async def replay(
    specs: list[RequestSpec],
    unit_factors: Mapping[str, float],
    target: LiveTarget,
    on_done: Callable[[RequestRecord], None] | None = None,
    failures: dict[str, int] | None = None,
) -> list[RequestRecord]:
    """Send every request at its (compressed) arrival time; one record per request sent.

    A workflow call (`spec.after` set) is sent as agent code would: only once the call it
    waits on ended `ok`, after its think time (`arrival` = that end + `think_s`, scenario
    time), with `X-Arbiter-Workflow` and `X-Arbiter-Upstream`; a call whose predecessor
    failed is never sent (its workflow stops there, as in the simulator's closed loop).
    Records come in send order of the roots, then of the released calls; `failures`, when
    given, counts why requests failed (`HTTP <status> <code>`, or the client's exception)."""
    waiting: dict[str, list[RequestSpec]] = {}
    roots: list[RequestSpec] = []
    for s in specs:
        (waiting.setdefault(s.after, []) if s.after is not None else roots).append(s)
    records: list[RequestRecord] = []
    start = time.monotonic()

    def clock() -> float:
        return (time.monotonic() - start) * target.speed

    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
    timeout = httpx.Timeout(target.timeout_s, connect=10.0)
    async with (
        httpx.AsyncClient(limits=limits, timeout=timeout) as client,
        asyncio.TaskGroup() as group,
    ):

        async def one(spec: RequestSpec) -> None:
            record = spec.record(unit_factors.get(spec.model, 1.0))
            records.append(record)
            await asyncio.sleep(max(0.0, spec.arrival / target.speed - (time.monotonic() - start)))
            try:
                why = await _stream(client, spec, record, target, clock)
            except (httpx.HTTPError, json.JSONDecodeError) as exc:
                record.status, record.finished = "error", clock()
                why = type(exc).__name__
            if why is not None and failures is not None:
                failures[why] = failures.get(why, 0) + 1
            if on_done is not None:
                on_done(record)
            released = waiting.pop(spec.id, [])
            if record.status == "ok" and record.finished is not None:
                for nxt in released:
                    group.create_task(one(replace(nxt, arrival=record.finished + nxt.think_s)))

        for spec in roots:
            group.create_task(one(spec))
    return records
