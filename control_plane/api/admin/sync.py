"""Telling the running system about a committed change.

After a tenant, application, agent or key change this gateway drops its directory cache and
bumps the `directory` knob so that every other gateway drops its own; a weight change also
writes the node's entry of the `weights` knob, which the scheduler leader applies at once.
The SQL change is already committed when these run, so a Redis outage here does not undo it:
it is returned as a warning (other gateways still expire their cache within seconds, and new
requests carry the new weights in their envelopes).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from control_plane.api.admin.deps import AdminContext
from control_plane.contracts.knobs import KnobValue, NodeWeights, Other
from control_plane.state import StateUnavailable

DIRECTORY_KNOB = "directory"
WEIGHTS_KNOB = "weights"


async def announce_directory(ctx: AdminContext) -> list[str]:
    """Invalidate this gateway's cache and announce a new directory version to the others."""
    ctx.directory.invalidate()
    try:
        await ctx.stores.knobs.set(DIRECTORY_KNOB, Other(time.time()))
    except StateUnavailable as exc:
        return [f"other gateways were not notified (Redis unavailable: {exc})"]
    return []


def merged_weights(
    current: Mapping[str, float], node: str, weight: float | None
) -> dict[str, float]:
    """`current` with `node` set to `weight`, or (None) without `node` and its descendants."""
    if weight is not None:
        return {**current, node: weight}
    return {k: v for k, v in current.items() if k != node and not k.startswith(node + "/")}


async def publish_weight(
    ctx: AdminContext, path: tuple[str, ...], weight: float | None
) -> list[str]:
    """Write (or drop) the node's entry of the `weights` knob."""
    node = "/".join(path)

    def merged(current: KnobValue | None) -> NodeWeights:
        old = current.table if isinstance(current, NodeWeights) else {}
        table = merged_weights({"/".join(n): w for n, w in old.items()}, node, weight)
        return NodeWeights({tuple(k.split("/")): w for k, w in table.items()})

    try:  # atomic: two weight changes at once each keep the other's entry
        await ctx.stores.knobs.update(WEIGHTS_KNOB, merged)
    except StateUnavailable as exc:
        return [f"the scheduler was not told the new weight (Redis unavailable: {exc})"]
    return []
