"""The admin API's side of telling the running system about a committed change.

After a tenant, application, agent or key change this gateway drops its directory cache and
the others are told through the `directory` knob; a weight change also writes the node's entry
of the `weights` knob with the weight SQL holds (`control_plane.admin.live_sync`, shared
with the CLI). The SQL change is already committed when these run, so a Redis outage here
does not undo it: it is returned as a warning (other gateways still expire their cache
within seconds, and new requests carry the new weights in their envelopes).
"""

from __future__ import annotations

import logging
import time

from control_plane.admin import tenancy
from control_plane.admin.live_sync import (
    WeightUnsettled,
    bump_directory,
    publish_committed_weight,
)
from control_plane.api.admin.deps import AdminContext, in_thread
from control_plane.state import StateUnavailable
from storage.errors import StorageError

log = logging.getLogger(__name__)


async def announce_directory(ctx: AdminContext) -> list[str]:
    """Invalidate this gateway's cache and announce a new directory version to the others."""
    ctx.directory.invalidate()
    try:
        await bump_directory(ctx.stores.knobs, time.time())
    except StateUnavailable as exc:
        return [f"other gateways were not notified (Redis unavailable: {exc})"]
    return []


async def publish_weight(ctx: AdminContext, path: tuple[str, ...]) -> list[str]:
    """Make the node's entry of the `weights` knob its committed weight (dropped with its
    descendants' when the node is gone), re-read until SQL and the knob agree."""

    async def committed() -> float | None:
        return await in_thread(tenancy.weight_of, ctx.db, path)

    try:
        await publish_committed_weight(ctx.stores.knobs, path, committed)
    except WeightUnsettled as exc:
        return [f"the scheduler was not told this weight: {exc} (the later changes tell it)"]
    except StateUnavailable as exc:
        return [f"the scheduler was not told the new weight (Redis unavailable: {exc})"]
    except StorageError as exc:  # the change committed; only its re-read failed
        log.warning("weight of %s not published: its re-read failed", path, exc_info=True)
        return [f"the scheduler was not told the new weight (database re-read failed: {exc})"]
    return []
