"""An ASGI app served by a real uvicorn on a free local port, for the length of a test."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import uvicorn


@contextlib.asynccontextmanager
async def serving(app: Any, **options: Any) -> AsyncIterator[str]:
    """Serve `app` (uvicorn `options` added to a quiet, lifespan-less config); → its base URL.

    The socket is bound here, on a port the kernel picks, and handed to uvicorn: no other
    process can take the port between choosing it and listening on it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", **options)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while True:  # uvicorn offers a flag, not an event, for "listening"
                if server.started or task.done():
                    break
                await asyncio.sleep(0.01)
        if not server.started:  # its task ended first: its own error, if any, comes out below
            raise RuntimeError(f"uvicorn stopped before it listened on port {port}")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
