"""Loading the Lua scripts of `scripts/*.lua` and calling them by SHA (EVALSHA)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from control_plane.state.client import MuxRedis

ScriptArg = str | int | float
Command = tuple[ScriptArg, ...]


@functools.cache
def script_source(name: str) -> str:
    """Text of `scripts/<name>.lua` (packaged with the code)."""
    return (resources.files("control_plane.state") / "scripts" / f"{name}.lua").read_text()


def script_names() -> list[str]:
    """Every script shipped in `scripts/`, without the `.lua` suffix."""
    folder = resources.files("control_plane.state") / "scripts"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".lua"))


@functools.cache
def script_sha(name: str) -> str:
    """The SHA1 Redis uses to name the script (computed locally: no round trip)."""
    return hashlib.sha1(script_source(name).encode()).hexdigest()


class Scripts:
    """Calls the packaged Lua scripts with EVALSHA: one round trip per call.

    The SHA is known locally, so a call never needs a prior SCRIPT LOAD. When Redis does not
    know a script (first use, a restart, `SCRIPT FLUSH`, a failover) it answers NOSCRIPT; the
    script is then loaded and the call repeated once, transparently. On a `MuxRedis` the
    calls share its pipelined connection (`control_plane.state.mux`).
    """

    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._mux = redis.mux if isinstance(redis, MuxRedis) else None

    async def load_all(self) -> dict[str, str]:
        """SCRIPT LOAD every script now (optional warm-up); returns name → SHA."""
        return {name: await self._load(name) for name in script_names()}

    async def call(self, name: str, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        """Run script `name` with `keys` as KEYS and `args` as ARGV."""
        sha = script_sha(name)
        try:
            return await self._evalsha(sha, keys, args)
        except NoScriptError:
            await self._load(name)
            return await self._evalsha(sha, keys, args)

    @staticmethod
    def command(name: str, keys: Sequence[str], args: Sequence[ScriptArg]) -> Command:
        """The EVALSHA command that `call` sends, for a caller that sends it with others (it
        must then handle NOSCRIPT itself, e.g. by `call`ing again)."""
        return ("EVALSHA", script_sha(name), len(keys), *keys, *args)

    def _evalsha(self, sha: str, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        if self._mux is not None:
            return self._mux.execute("EVALSHA", sha, len(keys), *keys, *args)
        return self._redis.evalsha(sha, len(keys), *keys, *args)

    async def _load(self, name: str) -> str:
        sha = str(await self._redis.script_load(script_source(name)))
        if sha != script_sha(name):
            raise RuntimeError(f"redis named script {name} {sha}, expected {script_sha(name)}")
        return sha
