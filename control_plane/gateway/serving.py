"""How one gateway process serves its app: uvicorn, pinned to uvloop and httptools, each
answer's headers sent in one write with its first bytes (`headers_with_body`).

Alone on its port (the default) it is plain `uvicorn.run`. Several gateway processes can share
one port (`arbiter up --gateways N`, `arbiter gateway --processes N`): each binds its own
socket to the port with `SO_REUSEPORT`, and the kernel spreads new connections over every
process listening there (by a hash of the connection's addresses). A process that exits takes
only its own socket with it; new connections go to the others until it is back. The socket is
bound before the app starts, so a port held by a process that does not share it fails at once,
but it listens only once the app's lifespan has run (uvicorn calls `listen`): no connection
waits in the queue of a process that is not serving yet.

A process may also listen on a status port of its own (`status_port`): the same app, so its
`/readyz` and `/metrics` can be asked of that one process (the shared port answers from
whichever process the kernel picks).
"""

from __future__ import annotations

import socket
from importlib.util import find_spec
from typing import Any

from control_plane.settings import Settings


class PortUnavailable(RuntimeError):
    """The gateway's port (or its status port) could not be bound; the message says which."""


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """Every gateway process's uvicorn settings (the host and port come separately)."""
    from control_plane.gateway.headers_with_body import HeadersWithBodyProtocol

    return {
        # pinned, not "auto": the fast loop and parser are the gateway's hot path
        "loop": "uvloop" if find_spec("uvloop") else "asyncio",
        "http": HeadersWithBodyProtocol,
        "log_level": "warning",
        "access_log": False,
        "timeout_graceful_shutdown": settings.shutdown_grace_s,
        # longer than clients' idle-connection expiry (httpx and so the openai client: 5 s),
        # so a client never sends on a kept-alive connection the gateway is just closing
        "timeout_keep_alive": settings.keep_alive_s,
    }


def bound_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    """A TCP socket bound to `host:port`, not yet listening; `reuse_port` shares the port."""
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        # as asyncio does: a restarted process may bind while old connections are in TIME_WAIT
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        how = " (shared with SO_REUSEPORT)" if reuse_port else ""
        raise PortUnavailable(f"cannot bind {host}:{port}{how}: {exc.strerror or exc}") from exc
    return sock


def serve(app: Any, settings: Settings, *, reuse_port: bool, status_port: int | None) -> None:
    """Serve `app` until SIGTERM/SIGINT: on `settings.port` (shared when `reuse_port`) and, when
    given, on `status_port` too (same interface)."""
    import uvicorn

    options = uvicorn_options(settings)
    if not reuse_port and status_port is None:
        uvicorn.run(app, host=settings.host, port=settings.port, **options)
        return
    sockets = [bound_socket(settings.host, settings.port, reuse_port=reuse_port)]
    try:
        if status_port is not None:
            sockets.append(bound_socket(settings.host, status_port, reuse_port=False))
        config = uvicorn.Config(app, host=settings.host, port=settings.port, **options)
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
