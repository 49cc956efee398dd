"""One streamed chat completion through the real `openai` client, classified by how it ended.

Every call ends in exactly one `Outcome`: `ok` (the stream ended with a finish reason and the
usage the request asked for), an explicit error (`http_<status>_<code>` for a refused request,
`sse_<code>` for an error event in the stream, `connection_error` for a refused or broken
connection), `incomplete` (the stream ended without a finish reason or short of its tokens:
a silent failure), or `hung` (no end within the client-side bound).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx
import openai

try:  # the transport under recent `openai` releases
    import httpx2

    _TRANSPORT: tuple[type[Exception], ...] = (
        openai.APIConnectionError,
        httpx.HTTPError,
        httpx2.HTTPError,
        OSError,
    )
    _LIMITS: httpx2.Limits | None = httpx2.Limits(
        max_connections=1000, max_keepalive_connections=100, keepalive_expiry=2.0
    )
except ImportError:  # pragma: no cover - older `openai` on httpx
    _TRANSPORT = (openai.APIConnectionError, httpx.HTTPError, OSError)
    _LIMITS = None

OK = "ok"
HUNG = "hung"
INCOMPLETE = "incomplete"
SILENT = (HUNG, INCOMPLETE)


@dataclass(frozen=True)
class Outcome:
    """How one request ended, with its `X-Arbiter-Request-Id` when the gateway gave one."""

    kind: str
    request_id: str | None
    tenant: str
    started: float
    ended: float
    tokens: int = 0
    stream: bool = True
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == OK

    @property
    def explicit_error(self) -> bool:
        return self.kind not in (OK, *SILENT)


def client_for(gateway: str, key: str, bound_s: float) -> openai.AsyncOpenAI:
    """An OpenAI client that never retries (every failure is counted) and outlives `bound_s`.

    Idle connections are dropped after 2 s, before the gateway's (uvicorn's 5 s) keep-alive
    timeout: with equal timeouts a request can be sent on a connection the server is closing,
    a client-side race that would be counted against the deployment.
    """
    http_client = None
    if _LIMITS is not None:
        http_client = openai.DefaultAsyncHttpxClient(limits=_LIMITS)
    return openai.AsyncOpenAI(
        base_url=f"{gateway.rstrip('/')}/v1",
        api_key=key,
        max_retries=0,
        timeout=bound_s + 30.0,
        http_client=http_client,
    )


def _code(exc: openai.APIError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    inner = body.get("error") if isinstance(body.get("error"), dict) else body
    return str(exc.code or (inner or {}).get("code") or "unknown")


async def _streamed(client: openai.AsyncOpenAI, kwargs: dict[str, Any], box: dict[str, Any]) -> str:
    raw = await client.chat.completions.with_raw_response.create(stream=True, **kwargs)
    box["rid"] = raw.headers.get("x-arbiter-request-id")
    finish, tokens = None, 0
    async for chunk in raw.parse():
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
        if chunk.usage is not None:
            tokens = chunk.usage.completion_tokens
    box["tokens"] = tokens
    return OK if finish and tokens == kwargs["max_tokens"] else INCOMPLETE


async def _unary(client: openai.AsyncOpenAI, kwargs: dict[str, Any], box: dict[str, Any]) -> str:
    raw = await client.chat.completions.with_raw_response.create(stream=False, **kwargs)
    box["rid"] = raw.headers.get("x-arbiter-request-id")
    resp = raw.parse()
    box["tokens"] = resp.usage.completion_tokens if resp.usage else 0
    finished = bool(resp.choices and resp.choices[0].finish_reason)
    return OK if finished and box["tokens"] == kwargs["max_tokens"] else INCOMPLETE


async def chat(
    client: openai.AsyncOpenAI,
    tenant: str,
    *,
    max_tokens: int,
    bound_s: float,
    stream: bool = True,
    prompt: str = "Tell me about fair scheduling.",
) -> Outcome:
    """Send one chat completion and classify its end (never raises for a request's failure)."""
    kwargs: dict[str, Any] = {
        "model": "tiny-llama",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "extra_body": {"ignore_eos": True, "min_tokens": max_tokens},
        "extra_headers": {"X-Arbiter-App": "bench", "X-Arbiter-Agent": tenant},
    }
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    box: dict[str, Any] = {"rid": None, "tokens": 0}
    started = time.monotonic()
    detail = ""
    try:
        run = _streamed(client, kwargs, box) if stream else _unary(client, kwargs, box)
        kind = await asyncio.wait_for(run, timeout=bound_s)
    except TimeoutError:
        kind = HUNG
    except openai.APIStatusError as exc:
        kind, detail = f"http_{exc.status_code}_{_code(exc)}", str(exc.message)[:200]
        box["rid"] = box["rid"] or exc.response.headers.get("x-arbiter-request-id")
    except _TRANSPORT as exc:
        kind, detail = "connection_error", f"{type(exc).__name__}: {exc}"[:200]
    except openai.APIError as exc:
        kind, detail = f"sse_{_code(exc)}", str(exc.message)[:200]
    return Outcome(
        kind, box["rid"], tenant, started, time.monotonic(), box["tokens"], stream, detail
    )
