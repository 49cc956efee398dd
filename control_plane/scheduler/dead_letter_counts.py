"""Every dead letter, by consumer and kind, on the leader's `/metrics`.

The dead-letter stream counts what each consumer set aside (`dead_letters:counts` in Redis,
never trimmed), but only the recorder exported its own in Prometheus: the scheduler's and the
gateways' (an arrival that cannot be scheduled, an event the leader cannot apply, a grant
entry nobody can read) were seen only by polling `GET /admin/dead-letters`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from control_plane.state import DeadLetters

log = logging.getLogger(__name__)
REFRESH_S: Final = 5.0


class DeadLetterCounts(Collector):
    """`arbiter_dead_letters_kept_total{consumer,kind}`: the counts Redis keeps, as a counter.

    Rule: the leader runs `follower`, which reads the counts every `every_s`, and `clear`s them
    when its term ends; a follower of an ended term sets nothing, and a standby exports no
    series, so at any instant at most one replica exports each count. Guarantee: a value is
    at most `every_s` (plus one Redis read) old; it continues across takeovers (it is Redis's
    count, not a replica's), and falls back only if Redis loses data, which Prometheus reads
    as a counter reset. A failed read is logged and retried: this loop never ends a term.
    """

    def __init__(self, every_s: float = REFRESH_S) -> None:
        self.every_s = every_s
        self._counts: dict[str, int] | None = None
        self._term = 0

    def follower(self, letters: DeadLetters) -> Callable[[], Awaitable[None]]:
        """The leader's loop that keeps the counts current."""
        self._term += 1
        term = self._term

        async def follow_dead_letters() -> None:
            while True:
                try:
                    counts = await letters.counts()
                except Exception as exc:  # Redis down, a value that is not a count: metrics only
                    log.warning("dead-letter counts not read: %s", exc)
                else:
                    if term == self._term:
                        self._counts = counts
                await asyncio.sleep(self.every_s)

        return follow_dead_letters

    def clear(self) -> None:
        self._term += 1
        self._counts = None

    def collect(self) -> Iterator[Metric]:
        if self._counts is None:
            return
        family = CounterMetricFamily(
            "arbiter_dead_letters_kept",
            "Entries any consumer set aside in the dead-letter stream, as Redis counts them "
            "(the leader exports it)",
            labels=["consumer", "kind"],
        )
        for name, count in sorted(self._counts.items()):
            consumer, _, kind = name.partition(":")
            family.add_metric([consumer, kind], float(count))
        yield family
