"""``create_app``: the simulated worker as an ASGI app with vLLM's OpenAI-server surface.

Routes (as ``python -m vllm.entrypoints.openai.api_server`` serves them): ``POST
/v1/chat/completions``, ``POST /v1/completions``, ``POST /v1/images/generations`` (an image
model's; ``workers.sim.images``), ``GET /v1/models``, ``POST /tokenize``,
``GET /health``, ``GET /metrics``, ``GET /version``. Any other path is 404 and a wrong method
405, in FastAPI's ``{"detail": ...}`` shape as vLLM answers them. Bodies must be
``application/json``, as vLLM requires. ``/tokenize`` counts with the one rule of
``workers.sim.tokens`` that ``usage`` uses too.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from workers.engine.vision import ImageError
from workers.sim import asgi
from workers.sim.asgi import Receive, Scope, Send
from workers.sim.config import SimConfig
from workers.sim.errors import PlainHTTPError, SimHTTPError, invalid_field
from workers.sim.requests import check_model, image_counter, load_json_object
from workers.sim.tokens import chat_token_ids, count_tokens, render_chat, token_ids, token_strs
from workers.sim.worker import SimWorker

VLLM_VERSION = "0.32.0"
Handler = Callable[[SimWorker, Scope, Receive, Send], Awaitable[None]]


async def _json_body(scope: Scope, receive: Receive) -> dict[str, Any]:
    media = (asgi.header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise SimHTTPError(
            400,
            "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
            "Bad Request",
        )
    return load_json_object(await asgi.read_body(receive))


async def _chat(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    body = await _json_body(scope, receive)
    await w.serve(w.validate("chat", body, scope), receive, send)


async def _completions(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    body = await _json_body(scope, receive)
    await w.serve(w.validate("completion", body, scope), receive, send)


async def _images(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    body = await _json_body(scope, receive)
    await w.serve_images(body, receive, send)


async def _models(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    now = int(time.time())
    permission = {
        "id": f"modelperm-{uuid.uuid4().hex[:16]}",
        "object": "model_permission",
        "created": now,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }
    card = {
        "id": w.served_model,
        "object": "model",
        "created": now,
        "owned_by": "vllm",
        "root": w.profile.model.name,
        "parent": None,
        "max_model_len": w.max_model_len,
        "permission": [permission],
    }
    await asgi.send_json(send, {"object": "list", "data": [card]})


async def _tokenize(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    body = await _json_body(scope, receive)
    check_model(body, w.served_model)
    strs: list[str] | None = None
    if "messages" in body:
        try:
            ids = chat_token_ids(body["messages"], image_counter(w.profile.model.image_tokens))
            text = render_chat(body["messages"])
        except (ValueError, ImageError) as exc:
            raise invalid_field("messages", "value_error", str(exc), body["messages"]) from None
        if body.get("return_token_strs") and len(ids) == count_tokens(text):
            strs = token_strs(text)
    elif isinstance(body.get("prompt"), str):
        text, bos = body["prompt"], body.get("add_special_tokens", True) is not False
        ids = token_ids(text, bos)
        strs = token_strs(text, bos) if body.get("return_token_strs") else None
    else:
        raise invalid_field("prompt", "missing", "Field required", body)
    await asgi.send_json(
        send,
        {"count": len(ids), "max_model_len": w.max_model_len, "tokens": ids, "token_strs": strs},
    )


async def _health(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    await asgi.send_bytes(send, 200, b"", None)


async def _metrics(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    await asgi.send_bytes(send, 200, w.metrics.render(), asgi.PROMETHEUS)


async def _version(w: SimWorker, scope: Scope, receive: Receive, send: Send) -> None:
    await asgi.send_json(send, {"version": VLLM_VERSION})


ROUTES: dict[str, tuple[str, Handler]] = {
    "/v1/chat/completions": ("POST", _chat),
    "/v1/completions": ("POST", _completions),
    "/v1/images/generations": ("POST", _images),
    "/v1/models": ("GET", _models),
    "/tokenize": ("POST", _tokenize),
    "/health": ("GET", _health),
    "/metrics": ("GET", _metrics),
    "/version": ("GET", _version),
}


async def _lifespan(worker: SimWorker, receive: Receive, send: Send) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            worker.driver.shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


class SimApp:
    """The ASGI app of one simulated worker; ``worker`` exposes its state to tests and tools."""

    def __init__(self, config: SimConfig) -> None:
        self.worker = SimWorker(config)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(self.worker, receive, send)
            return
        if scope["type"] != "http":
            return
        route = ROUTES.get(scope["path"].rstrip("/") or "/")
        method = scope["method"]
        try:
            if route is None:
                raise PlainHTTPError(404, "Not Found")
            if method != route[0] and not (route[0] == "GET" and method == "HEAD"):
                raise PlainHTTPError(405, "Method Not Allowed")
            await route[1](self.worker, scope, receive, send)
        except (SimHTTPError, PlainHTTPError) as err:
            await asgi.send_bytes(send, err.status, err.body(), asgi.JSON)
        except asgi.ClientGoneError:
            return
        except asyncio.CancelledError:
            # uvicorn gave up waiting for this stream at shutdown (its request is already
            # aborted in the engine); end quietly instead of logging a traceback
            return


def create_app(config: SimConfig) -> SimApp:
    """A new simulated worker (its own engine, metrics registry and fault state) as ASGI app."""
    return SimApp(config)
