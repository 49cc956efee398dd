"""Repositories: one class per aggregate, keyword-only arguments, records in and out."""

from storage.repos.audit import AuditRepo
from storage.repos.fleet import ModelRepo, WorkerRepo
from storage.repos.keys import KeyRepo, hash_key
from storage.repos.operators import OperatorRecord, OperatorRepo
from storage.repos.program_reports import program_report_from_requests
from storage.repos.raw_reports import report_from_requests
from storage.repos.requests import RequestRepo
from storage.repos.rollups import RollupRepo
from storage.repos.tenants import TenantRepo

__all__ = [
    "AuditRepo",
    "KeyRepo",
    "ModelRepo",
    "OperatorRecord",
    "OperatorRepo",
    "RequestRepo",
    "RollupRepo",
    "TenantRepo",
    "WorkerRepo",
    "hash_key",
    "program_report_from_requests",
    "report_from_requests",
]
