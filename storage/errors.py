"""Domain errors raised by repositories, so callers never see SQLAlchemy exceptions."""

from __future__ import annotations


class StorageError(Exception):
    """Base of every error `storage/` raises on purpose."""


class NotFoundError(StorageError, LookupError):
    """The named tenant, application, agent, key, model or worker does not exist."""


class AlreadyExistsError(StorageError):
    """A unique name (or URL) is already taken."""


class ChangedMeanwhile(StorageError):
    """A row no longer holds the values the caller read (`expected`): nothing was written."""


class InvalidValueError(StorageError, ValueError):
    """A field value is out of its domain (e.g. a weight ≤ 0 or an unknown status)."""


class StorageUnavailable(StorageError):
    """The database cannot serve right now (down, unreachable, locked, full): retry later."""


class RowsRejected(StorageError, ValueError):
    """The database refused the values written (out of range, too long, a constraint):
    writing the same rows again cannot succeed."""
