"""Memory footprint of a running deployment: RSS per process and Redis's own `used_memory`.

RSS comes from `/proc/<pid>/status` (VmRSS). Redis's figure is asked of the server with
`redis-cli INFO memory` — the operator's tool, so the bench opens no Redis client of its own
(only `control_plane.state` does that) — and is None when `redis-cli` is not installed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit, urlunsplit

from control_plane.bench import procs


@dataclass(frozen=True)
class Footprint:
    """One sample: KiB of RSS per process name (with its pid), Redis `used_memory` in bytes."""

    rss_kb: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    redis_used_memory: int | None = None


def rss(found: list[procs.Proc]) -> tuple[dict[str, int], dict[str, int]]:
    """RSS (KiB) and pid per process name, for the processes still alive."""
    sizes: dict[str, int] = {}
    pids: dict[str, int] = {}
    for p in found:
        kb = procs.rss_kb(p.pid)
        if kb is not None:
            sizes[p.name], pids[p.name] = kb, p.pid
    return sizes, pids


def parse_used_memory(info: str) -> int | None:
    """`used_memory` (bytes) from the text of `INFO memory`."""
    for line in info.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":", 1)[1].strip())
    return None


def _without_password(redis_url: str) -> tuple[str, str | None, str | None]:
    """The URL without its credentials, its user and its password (for `--user` and
    `REDISCLI_AUTH`: a command line is readable by every local user, and redis-cli reads a
    URL's lone user as a password)."""
    parts = urlsplit(redis_url)
    if parts.password is None and parts.username is None:
        return redis_url, None, None
    host = parts.netloc.rsplit("@", 1)[1]
    user = unquote(parts.username) if parts.username else None
    password = None if parts.password is None else unquote(parts.password)
    return urlunsplit(parts._replace(netloc=host)), user, password


async def redis_used_memory(redis_url: str, timeout_s: float = 5.0) -> int | None:
    exe = shutil.which("redis-cli")
    if exe is None or not redis_url:
        return None
    url, user, password = _without_password(redis_url)
    env = {**os.environ, "REDISCLI_AUTH": password} if password else None
    proc = await asyncio.create_subprocess_exec(
        exe,
        "-u",
        url,
        *(("--user", user) if user else ()),
        "INFO",
        "memory",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None
    return parse_used_memory(out.decode(errors="replace"))


async def sample(found: list[procs.Proc], redis_url: str) -> Footprint:
    sizes, pids = rss(found)
    return Footprint(sizes, pids, await redis_used_memory(redis_url))
