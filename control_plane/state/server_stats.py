"""What Redis itself spent, per command (`INFO commandstats`), for benchmarks."""

from __future__ import annotations

from control_plane.state.client import connect


async def command_stats(url: str) -> dict[str, dict[str, float]]:
    """Per command since the server started: calls and microseconds spent (Redis's own
    accounting: the time inside the command, not the round trip or the AOF fsync)."""
    client = connect(url, retries=0)
    try:
        info = await client.info("commandstats")
    finally:
        await client.aclose()
    return {
        str(name).removeprefix("cmdstat_"): {"calls": float(v["calls"]), "usec": float(v["usec"])}
        for name, v in info.items()
        if isinstance(v, dict)
    }
