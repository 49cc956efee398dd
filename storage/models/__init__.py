"""Every table of Arbiter's SQL schema (one `Base.metadata`)."""

from storage.models.base import Base, table_of
from storage.models.fleet import ModelSpec, Worker
from storage.models.history import AuditEntry, RequestRow
from storage.models.operators import OperatorAccount
from storage.models.rollups import FairnessRollup, RollupHorizon
from storage.models.tenancy import Agent, ApiKey, Application, Tenant

__all__ = [
    "Agent",
    "ApiKey",
    "Application",
    "AuditEntry",
    "Base",
    "FairnessRollup",
    "ModelSpec",
    "OperatorAccount",
    "RequestRow",
    "RollupHorizon",
    "Tenant",
    "Worker",
    "table_of",
]
