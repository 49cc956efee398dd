"""Serving an ASGI app with a real uvicorn server on a free port, in a background thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from tests.support.ports import free_port, wait_http


@contextmanager
def served(app: Any, *, ready_path: str = "/healthz", timeout_s: float = 30.0) -> Iterator[str]:
    """Run `app` until the block ends; yields its base URL once `ready_path` answers 200."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + ready_path, timeout=timeout_s)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
