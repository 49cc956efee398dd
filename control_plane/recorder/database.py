"""The recorder's database at start: migrated, and waited for while it cannot be reached."""

from __future__ import annotations

import asyncio
import logging

from storage.db import Database
from storage.errors import StorageUnavailable

MIGRATE_RETRY_MAX_S = 30.0
log = logging.getLogger(__name__)


async def migrate_when_reachable(db: Database) -> None:
    """Migrate `db`, waiting for it while it cannot be reached (it may start after the
    recorder: a crash and a restart loop would only hide that), the pause doubling up to
    `MIGRATE_RETRY_MAX_S`; a newer build's schema is run on with a warning
    (`Database.migrate`); any other storage error raises."""
    delay = 1.0
    while True:
        try:
            await asyncio.to_thread(db.migrate)
            return
        except StorageUnavailable as exc:
            log.warning("database not migrated, trying again in %.0f s: %s", delay, exc)
            await asyncio.sleep(delay)
            delay = min(2 * delay, MIGRATE_RETRY_MAX_S)
