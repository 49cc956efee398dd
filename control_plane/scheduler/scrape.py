"""Reading a worker's health, models and load from its own endpoints (vLLM's names).

The same code reads a real vLLM server and Arbiter's simulated worker: `/health`, `/v1/models`
(`max_model_len`) and `/metrics` (`vllm:num_requests_running`, `vllm:num_requests_waiting`,
`vllm:kv_cache_usage_perc`, `vllm:num_preemptions_total`, `vllm:cache_config_info`).
"""

from __future__ import annotations

import logging
import time
from typing import NamedTuple

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from control_plane.contracts.workers import WorkerSample

log = logging.getLogger(__name__)

_GAUGES = {
    "vllm:num_requests_running": "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:num_preemptions_total": "preemptions_total",
}
_KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
"""The KV-cache fraction in use, by its current name and the one before vLLM 0.10 (versions in
between export both, with the same value)."""


def parse_metrics(text: str) -> dict[str, float | int | None]:
    """Sum vLLM's load metrics over label sets (one per engine of a data-parallel server); the
    KV fraction is the engines' mean, read under its current name when present, else the old
    one; KV capacity from `cache_config_info`.

    A line scan rather than prometheus-client's full parser: the scheduler scrapes every
    worker twice a second and needs five series out of hundreds (histogram buckets dominate);
    the full parser cost ~10 % of the scheduler's CPU under load.
    """
    out: dict[str, float | int | None] = {}
    kv: dict[str, list[float]] = {name: [] for name in _KV_USAGE}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        brace = line.find("{")
        space = line.rfind(" ")
        name = line[: brace if 0 < brace < space else space]
        key = _GAUGES.get(name)
        if key is not None:
            out[key] = float(out.get(key) or 0.0) + float(line[space + 1 :])
        elif name in kv:
            kv[name].append(float(line[space + 1 :]))
        elif name == "vllm:cache_config_info":
            labels = _labels(line[brace + 1 : line.rfind("}")])
            blocks, size = labels.get("num_gpu_blocks"), labels.get("block_size")
            if blocks and size and blocks.isdigit() and size.isdigit():
                out["kv_tokens"] = int(blocks) * int(size)
    usage = kv[_KV_USAGE[0]] or kv[_KV_USAGE[1]]
    if usage:
        out["kv_usage"] = sum(usage) / len(usage)
    return out


def _labels(body: str) -> dict[str, str]:
    """`a="1",b="x"` → {"a": "1", "b": "x"} (cache_config_info has no escaped quotes)."""
    for family in text_string_to_metric_families(f"x{{{body}}} 1\n"):
        for sample in family.samples:
            return dict(sample.labels)
    return {}


class _Unreadable(Exception):
    """A worker endpoint that did not answer as vLLM does; the message says how."""


async def scrape(session: aiohttp.ClientSession, url: str, limit_s: float = 2.0) -> WorkerSample:
    """Health, models and metrics of the worker at `url` (root, no `/v1`).

    aiohttp rather than httpx: the leader asks every worker three times per scrape interval,
    and httpx costs about 1.2 CPU-ms for the three against 0.23 (measured on a 2-core box) —
    a quarter of a core at 100 workers scraped twice a second. Guarantee: this returns a
    sample and never raises — a worker that cannot be read (refused, timed out, a URL that
    does not resolve, a status other than 200 — redirects are not followed —, a body that is
    not vLLM's shape) is unhealthy, with the endpoint and the reason.
    """
    now = time.time()
    try:
        health = await _get(session, url, "/health", limit_s)
        if health.status != 200:
            return WorkerSample(False, now, error=f"/health answered {health.status}")
        models = _models(await _get(session, url, "/v1/models", limit_s))
        parsed = _metrics(await _get(session, url, "/metrics", limit_s))
    except _Unreadable as exc:
        return WorkerSample(False, now, error=str(exc))
    sample = WorkerSample(True, now, models=models)
    for key, value in parsed.items():
        setattr(sample, key, int(value) if key == "kv_tokens" and value is not None else value)
    return sample


class _Answer(NamedTuple):
    status: int
    body: bytes


async def _get(session: aiohttp.ClientSession, url: str, path: str, limit_s: float) -> _Answer:
    try:
        timeout = aiohttp.ClientTimeout(total=limit_s)
        async with session.get(url + path, timeout=timeout, allow_redirects=False) as resp:
            return _Answer(resp.status, await resp.read())
    # OSError covers TimeoutError; ValueError a host name that cannot be encoded (UnicodeError)
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        raise _Unreadable(f"{path}: {type(exc).__name__}: {exc}") from exc


def _models(answer: _Answer) -> dict[str, int | None]:
    if answer.status != 200:
        raise _Unreadable(f"/v1/models answered {answer.status}")
    try:
        return {m["id"]: m.get("max_model_len") for m in orjson.loads(answer.body).get("data", [])}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise _Unreadable(f"/v1/models: not a model list ({exc!r})") from exc


def _metrics(answer: _Answer) -> dict[str, float | int | None]:
    if answer.status != 200:
        raise _Unreadable(f"/metrics answered {answer.status}")
    try:
        return parse_metrics(answer.body.decode("utf-8", "replace"))
    except ValueError as exc:
        raise _Unreadable(f"/metrics: not Prometheus text ({exc})") from exc


async def scrape_or_unhealthy(session: aiohttp.ClientSession, url: str) -> WorkerSample:
    """`scrape`, and should it raise anyway, an unhealthy sample: one worker must not end
    the loop (and with it the leader's term)."""
    try:
        return await scrape(session, url)
    except Exception as exc:
        log.exception("scraping %s failed", url)
        return WorkerSample(False, time.time(), error=f"{type(exc).__name__}: {exc}")
