"""Knobs a gateway follows live: cache invalidation, default queue cap, default SLOs.

Rule: the gateway subscribes to knob changes and re-reads every knob after (re)subscribing,
since pub/sub does not replay what was published while it was disconnected.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

from control_plane.contracts.knobs import KnobValue, QueueCap, SloTargets
from control_plane.gateway.identity import SloDefaults
from control_plane.state import StateStores, StateUnavailable

log = logging.getLogger(__name__)


class Invalidatable(Protocol):
    def invalidate(self) -> None: ...


@dataclass
class GatewayKnobs:
    """The knob values the request path reads (plain attributes: no I/O on the hot path)."""

    queue_cap_default: int | None = None
    slo_defaults: SloDefaults = field(default_factory=SloDefaults)

    def apply(self, name: str, value: KnobValue, directory: Invalidatable) -> None:
        if name == "directory":
            directory.invalidate()
        elif name == "queue_cap" and isinstance(value, QueueCap):
            self.queue_cap_default = value.default
        elif name == "slo_defaults" and isinstance(value, SloTargets):
            self.slo_defaults = SloDefaults(value.ttft_ms, value.tpot_ms, value.e2e_ms)


async def follow_knobs(stores: StateStores, knobs: GatewayKnobs, directory: Invalidatable) -> None:
    """Apply knob changes until cancelled; survives Redis outages."""
    backoff = 0.1
    while True:
        try:
            subscription = await stores.knobs.subscribe()
            async with subscription:
                for name, value in (await stores.knobs.get_all()).items():
                    knobs.apply(name, value, directory)
                directory.invalidate()  # anything may have changed while we were away
                backoff = 0.1
                async for change in subscription:
                    knobs.apply(change.name, change.value, directory)
        except StateUnavailable:
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)
