"""A completion the reporter can only send bare keeps what the recorder needs for its row."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from control_plane.contracts.events import Complete, Event
from control_plane.gateway.reporter import EventReporter
from control_plane.state import StateStores
from tests.control_plane.gateway.test_reporter import _complete


class OnlyBare:
    """The real sink, except that a completion that is not bare cannot be sent (as if one of
    its timings could not be encoded)."""

    def __init__(self, stores: StateStores) -> None:
        self.stores = stores

    async def publish(
        self, events: Sequence[Event], finished: Sequence[tuple[str, str]], *, now: float
    ) -> bool:
        if any(isinstance(e, Complete) and "gateway log" not in (e.error or "") for e in events):
            raise TypeError("cannot be encoded (test)")
        return await self.stores.completions.publish(events, finished, now=now)


async def test_a_bare_completion_keeps_its_sender_and_arrival(redis_url: str) -> None:
    """So the recorder can still write the request's row (before, a bare completion had no
    sender: no row, and nothing said so)."""
    stores = StateStores.open(redis_url, "rep-bare-sender")
    try:
        reporter = EventReporter(OnlyBare(stores))
        event = dataclasses.replace(_complete("r1"), arrival=1.5)
        reporter.emit(event, finish="error")
        await reporter.flush()
        entries = await stores.redis.xrange(stores.keyspace.events)
        sent = json.loads(entries[0][1]["data"])
        assert (sent["tenant"], sent["arrival"]) == ("acme", 1.5)
        assert "gateway log" in sent["error"]
    finally:
        await stores.aclose()
