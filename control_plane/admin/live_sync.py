"""Telling the running system about a committed tenancy change, whichever door it came in by.

The admin API and the `arbiter admin tenants` commands both call these after the SQL change
committed: the `directory` knob tells every gateway to drop its cached tenants and keys, and a
weight change writes the node's entry of the `weights` knob, which the scheduler leader applies
at once and on every takeover (and which the live fairness view reads over SQL). A door that
changed a weight without writing the knob left any older entry for that node in force.
Each raises `StateUnavailable` when Redis does not answer; the SQL change stands either way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from control_plane.contracts.knobs import KnobValue, NodeWeights, Other
from control_plane.state import StateUnavailable
from control_plane.state.knobs import Knobs

DIRECTORY_KNOB = "directory"
WEIGHTS_KNOB = "weights"
PUBLISH_ATTEMPTS = 8


def merged_weights(
    current: Mapping[str, float], node: str, weight: float | None
) -> dict[str, float]:
    """`current` with `node` set to `weight`, or (None) without `node` and its descendants."""
    if weight is not None:
        return {**current, node: weight}
    return {k: v for k, v in current.items() if k != node and not k.startswith(node + "/")}


async def bump_directory(knobs: Knobs, now: float) -> None:
    """Announce a new directory version: every gateway drops its cached tenants and keys."""
    await knobs.set(DIRECTORY_KNOB, Other(now))


async def write_weight(knobs: Knobs, path: tuple[str, ...], weight: float | None) -> None:
    """Set the node's entry of the `weights` knob, or (None: deleted) drop it and its
    descendants' entries; atomic, so two changes at once each keep the other's entry."""
    node = "/".join(path)

    def merged(current: KnobValue | None) -> NodeWeights:
        old = current.table if isinstance(current, NodeWeights) else {}
        table = merged_weights({"/".join(n): w for n, w in old.items()}, node, weight)
        return NodeWeights({tuple(k.split("/")): w for k, w in table.items()})

    await knobs.update(WEIGHTS_KNOB, merged)


class WeightUnsettled(StateUnavailable):
    """The node's weight kept changing in SQL while it was published (the changes still racing
    publish after this one)."""


async def publish_committed_weight(
    knobs: Knobs,
    path: tuple[str, ...],
    read_weight: Callable[[], Awaitable[float | None]],
    attempts: int = PUBLISH_ATTEMPTS,
) -> None:
    """Make the node's entry of the `weights` knob what SQL holds now (`read_weight`: the
    committed weight, None when the node is gone), then read SQL again and repeat until the
    two agree.

    Why not write the weight this change committed: two changes committed A then B could
    write B then A, leaving the scheduler on A while SQL holds B. Guarantee: once every
    change's publication has returned without error, the node's entry holds its last
    committed weight — the last write was followed by a read that found SQL unchanged, and
    any later commit publishes after it; a write whose caller gave up and that lands late is
    refused by the knob's compare-and-set once another publication wrote. Not covered: a
    deletion's write also drops the descendants' entries, so a subtree re-created and
    published while that write was on its way loses its descendants' entries (the scheduler
    runs them at weight 1 until their next change). `WeightUnsettled` when SQL kept changing
    through `attempts` rounds; `StateUnavailable` when Redis does not answer; the reads'
    own errors as they come."""
    for _ in range(attempts):
        weight = await read_weight()
        await write_weight(knobs, path, weight)
        if await read_weight() == weight:
            return
    node = "/".join(path)
    raise WeightUnsettled(f"the weight of {node} kept changing while it was published")
