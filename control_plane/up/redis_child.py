"""The private `redis-server` of `arbiter up`: its command, its password, and its readiness.

Rules and guarantees:

- Its data (AOF) lives in `<state-dir>/redis`; it listens on loopback only.
- It requires a password, generated for each `arbiter up` and kept in `<state-dir>/redis/
  redis.conf` (0600, in the 0700 state directory): another local user can neither read the
  queued requests nor write the counters, and the password never appears in a command line
  (`ps`). The children get it in their Redis URL, up.json (0600) records it.
- It counts as started only when the server answering on its port is this child (by pid):
  another server that took the port in between is refused, never used.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from control_plane.state import StateUnavailable, connect, server_pid
from control_plane.up.children import Child
from control_plane.up.errors import UpError
from control_plane.up.state_files import PRIVATE_FILE

REDIS_DIRTY_DECAY_MS = 1000
"""How long Redis's allocator keeps freed pages before returning them (jemalloc: 10,000)."""


REDIS_LINGER_S = 20.0
"""Once `up` is gone, how long Redis keeps running before its tether stops it: the gateways
drain (10 s by default), the leader hands its lease over and the recorder acknowledges, all
through Redis."""


def redis_url(port: int, password: str | None) -> str:
    """The URL the children use for the private Redis on `port`."""
    auth = "" if password is None else f":{quote(password, safe='')}@"
    return f"redis://{auth}127.0.0.1:{port}/0"


def redis_child(state_dir: Path, port: int, fsync: str, password: str | None = None) -> Child:
    """The `redis-server` child (not started); `UpError` when there is no redis-server."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise UpError(
            "redis-server is not on PATH. Install it first, e.g. "
            "`sudo apt-get install redis-server` (Debian/Ubuntu) or "
            "`brew install redis` (macOS)."
        )
    data = state_dir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    conf = _config_file(data, password)
    return Child(
        "redis",
        [
            exe,
            str(conf.resolve()),
            *("--port", str(port), "--bind", "127.0.0.1", "--dir", str(data.resolve())),
            "--appendonly",
            "yes",
            # everysec: written to the file before each reply, so a kill -9 of redis-server
            # keeps every acknowledged write; a machine crash may lose the last second or two
            *("--appendfsync", fsync, "--save", ""),
        ],
        state_dir / "logs" / "redis.log",
        env=redis_allocator_env(os.environ),
        linger_s=REDIS_LINGER_S,
    )


def _config_file(data: Path, password: str | None) -> Path:
    """`redis.conf` holding the password (written afresh, 0600 from creation on)."""
    conf = data / "redis.conf"
    conf.unlink(missing_ok=True)
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    with os.fdopen(fd, "w") as out:
        if password is not None:
            out.write(f'requirepass "{password}"\n')
    return conf


def redis_allocator_env(environ: Mapping[str, str]) -> dict[str, str]:
    """jemalloc settings for the private `redis-server`, unless the operator set their own.

    Freed pages go back to the OS within `REDIS_DIRTY_DECAY_MS` instead of jemalloc's default
    10 s, so Redis's RSS follows its live data: under steady churn (every request hash lives
    about a minute) the default kept up to ~6 MiB of freed pages resident and RSS crept up
    with every burst (docs/operations.md, "Soak"). Debian's and most distributions' builds
    link the system jemalloc, which reads `MALLOC_CONF` (Redis's own `activedefrag` needs
    the bundled one).
    """
    if "MALLOC_CONF" in environ:
        return {}
    return {"MALLOC_CONF": f"dirty_decay_ms:{REDIS_DIRTY_DECAY_MS},muzzy_decay_ms:0"}


def wait_redis(url: str, child: Child) -> None:
    """Until the child answers on its port. Another server that holds the port (taken between
    choosing it and the child's bind) is told apart by its pid and refused, never used."""

    async def answering_pid() -> int | str | None:
        """The pid answering on the port; None when nothing answers yet."""
        client = connect(url, retries=0)
        try:
            pid = await server_pid(client)
            return "one that will not say" if pid is None else pid
        except StateUnavailable:
            return None
        finally:
            await client.aclose()

    deadline = time.monotonic() + 15
    while (pid := asyncio.run(answering_pid())) is None:
        if time.monotonic() > deadline or not child.alive():
            raise UpError(f"redis-server did not start:\n{child.tail()}")
        time.sleep(0.1)
    if not _ours(pid, child):
        where = url.rsplit("@", 1)[-1]  # the password stays out of the message
        raise UpError(f"{where} is answered by another Redis (pid {pid}); run `arbiter up` again")


def _ours(pid: int | str, child: Child) -> bool:
    """`pid` is the child or runs in its process group (redis-server under its tether)."""
    if child.proc is None or not isinstance(pid, int):
        return False
    try:
        return pid == child.proc.pid or os.getpgid(pid) == child.proc.pid
    except (ProcessLookupError, PermissionError):
        return False
