"""Telling the running system about a committed tenancy change, whichever door it came in by.

The admin API and the `arbiter admin tenants` commands both call these after the SQL change
committed: the `directory` knob tells every gateway to drop its cached tenants and keys, and a
weight change writes the node's entry of the `weights` knob, which the scheduler leader applies
at once and on every takeover (and which the live fairness view reads over SQL). A door that
changed a weight without writing the knob left any older entry for that node in force.
Each raises `StateUnavailable` when Redis does not answer; the SQL change stands either way.
"""

from __future__ import annotations

from collections.abc import Mapping

from control_plane.contracts.knobs import KnobValue, NodeWeights, Other
from control_plane.state.knobs import Knobs

DIRECTORY_KNOB = "directory"
WEIGHTS_KNOB = "weights"


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
