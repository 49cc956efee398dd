"""Arbiter's SQL storage: typed models, repositories, Alembic migrations, fairness rollups.

Only this package touches SQLAlchemy; it imports nothing else of the project. Repositories take
and return the immutable records of `storage.records`, raise the errors of `storage.errors`,
and run inside one transaction per `Database.repos()` block. Nothing is created at import time.
"""

from storage.db import Database, Repos
from storage.errors import AlreadyExistsError, InvalidValueError, NotFoundError, StorageError
from storage.migrate import migrate
from storage.records import (
    AgentRecord,
    ApiKeyRecord,
    AppRecord,
    AuditRecord,
    ModelRecord,
    RequestRecord,
    TenantRecord,
    TenantUsage,
    WorkerRecord,
)
from storage.reports import KindService, NodeReport, Percentiles, Report, WindowPoint, jain

__all__ = [
    "AgentRecord",
    "AlreadyExistsError",
    "ApiKeyRecord",
    "AppRecord",
    "AuditRecord",
    "Database",
    "InvalidValueError",
    "KindService",
    "ModelRecord",
    "NodeReport",
    "NotFoundError",
    "Percentiles",
    "Report",
    "Repos",
    "RequestRecord",
    "StorageError",
    "TenantRecord",
    "TenantUsage",
    "WindowPoint",
    "WorkerRecord",
    "jain",
    "migrate",
]
