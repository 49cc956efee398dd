"""Opening a granted request's stream on its worker: the payload, the pooled client and the
classification of failures (unreachable before the first token, rejected with a 4xx, the
client gone first). Relaying the answer is `control_plane.gateway.relay`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import orjson

from control_plane.gateway.errors import error_body


class WorkerUnreachable(Exception):
    """The worker failed before sending a first token (connect error, 5xx, broken stream)."""


class WorkerRejected(Exception):
    """The worker refused the request (4xx): the client gets the worker's error as is."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"worker answered {status}")
        self.status = status
        self.body = body


def upstream_payload(
    body: dict[str, Any], priority: int | None, *, continuous: bool = False
) -> dict[str, Any]:
    """The client's body as the worker must see it: always streamed, with usage at the end
    (and on every chunk when `continuous`: the client asked for it)."""
    payload = dict(body)
    payload.pop("metadata", None)
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}
    if continuous:
        payload["stream_options"]["continuous_usage_stats"] = True
    payload.pop("priority", None)
    if priority is not None:
        payload["priority"] = priority
    return payload


def upstream_session(
    connect_timeout_s: float, idle_timeout_s: float | None = None
) -> aiohttp.ClientSession:
    """The pooled client for workers (aiohttp: several times cheaper per streamed line than
    httpx on the relay's hot path). Create it inside the running event loop. A worker silent
    for `idle_timeout_s` (any one read) fails the request instead of holding it forever."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
        timeout=aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout_s, sock_read=idle_timeout_s
        ),
        json_serialize=lambda obj: orjson.dumps(obj).decode(),
    )


async def open_upstream(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict[str, Any],
    read_timeout_s: float | None = None,
) -> aiohttp.ClientResponse:
    """Send the request and wait for the worker's status line; classify failures.
    `read_timeout_s` replaces the session's idle bound for this request."""
    timeout = None
    if read_timeout_s is not None:
        base = session.timeout
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=base.sock_connect, sock_read=read_timeout_s
        )
    try:
        resp = await session.post(
            url, data=orjson.dumps(payload), headers=_JSON, timeout=timeout or session.timeout
        )
    except (aiohttp.ClientError, OSError) as exc:
        raise WorkerUnreachable(f"{type(exc).__name__}: {exc}") from exc
    if resp.status == 200:
        return resp
    raw = await _read_safely(resp)
    if 400 <= resp.status < 500:
        raise WorkerRejected(resp.status, worker_error_body(raw, resp.status))
    raise WorkerUnreachable(f"worker answered {resp.status}")


_JSON = {"content-type": "application/json"}


class ClientLeft(Exception):
    """The client disconnected while its worker was working."""


async def open_unless_left(
    session: aiohttp.ClientSession,
    url: str,
    payload: dict[str, Any],
    read_timeout_s: float,
    left: asyncio.Future[None],
) -> aiohttp.ClientResponse:
    """`open_upstream` for an answer that sends nothing until it is done (an image
    generation), raced against `left` (the client's disconnect): `ClientLeft` when the client
    goes first, after closing the connection, so the worker aborts the work."""
    task = asyncio.ensure_future(open_upstream(session, url, payload, read_timeout_s))
    waited: set[asyncio.Future[Any]] = {task, left}
    await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, WorkerUnreachable, WorkerRejected):
        await task
    raise ClientLeft


async def _read_safely(resp: aiohttp.ClientResponse) -> bytes:
    try:
        return await resp.read()
    except (aiohttp.ClientError, OSError):
        return b""
    finally:
        resp.release()


def worker_error_body(raw: bytes, status: int) -> dict[str, Any]:
    """The client's OpenAI-shaped error body for a worker's error `raw` answered as `status`."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        err = data["error"]
        return error_body(
            str(err.get("message", "")),
            str(err.get("type") or "invalid_request_error"),
            err.get("param"),
            _code(err.get("code"), status),
        )
    if isinstance(data, dict) and "message" in data:  # vLLM's older flat ErrorResponse
        return error_body(
            str(data["message"]),
            str(data.get("type") or "invalid_request_error"),
            data.get("param"),
            _code(data.get("code"), status),
        )
    return error_body(
        raw.decode(errors="replace")[:500] or f"worker answered {status}",
        "invalid_request_error",
        None,
        None,
    )


def _code(code: Any, status: int) -> str | None:
    if code is None or isinstance(code, str):
        return code
    return None if code == status else str(code)
