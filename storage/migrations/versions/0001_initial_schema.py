"""Initial schema: tenancy, keys, models, workers, request history, audit log, rollups.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=256), nullable=False),
        sa.Column("old", sa.JSON(), nullable=False),
        sa.Column("new", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"], unique=False)
    op.create_index(op.f("ix_audit_log_target_at"), "audit_log", ["target", "at"], unique=False)

    op.create_table(
        "fairness_rollups",
        sa.Column("level", sa.String(length=8), nullable=False),
        sa.Column("window_s", sa.Integer(), nullable=False),
        sa.Column("bucket", sa.BigInteger(), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("app", sa.String(length=128), nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("ok", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("violations", sa.Integer(), nullable=False),
        sa.Column("n_in", sa.BigInteger(), nullable=False),
        sa.Column("n_out", sa.BigInteger(), nullable=False),
        sa.Column("unified_service", sa.Double(), nullable=False),
        sa.Column("n_ttft", sa.Integer(), nullable=False),
        sa.Column("sum_ttft_ms", sa.Double(), nullable=False),
        sa.Column("n_tpot", sa.Integer(), nullable=False),
        sa.Column("sum_tpot_ms", sa.Double(), nullable=False),
        sa.Column("n_e2e", sa.Integer(), nullable=False),
        sa.Column("sum_e2e_ms", sa.Double(), nullable=False),
        sa.Column("n_queue", sa.Integer(), nullable=False),
        sa.Column("sum_queue_ms", sa.Double(), nullable=False),
        sa.Column("ttft_hist", sa.LargeBinary(), nullable=False),
        sa.Column("tpot_hist", sa.LargeBinary(), nullable=False),
        sa.Column("e2e_hist", sa.LargeBinary(), nullable=False),
        sa.CheckConstraint(
            "level IN ('tenant', 'app', 'agent')", name=op.f("ck_fairness_rollups_level")
        ),
        sa.CheckConstraint(
            "window_s IN (60, 3600, 86400)", name=op.f("ck_fairness_rollups_window")
        ),
        sa.PrimaryKeyConstraint(
            "level",
            "window_s",
            "bucket",
            "tenant",
            "app",
            "agent",
            name=op.f("pk_fairness_rollups"),
        ),
    )
    op.create_table(
        "models",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("hidden_size", sa.Integer(), nullable=False),
        sa.Column("num_layers", sa.Integer(), nullable=False),
        sa.Column("unified_cost_factor", sa.Double(), nullable=True),
        sa.Column("max_model_len", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('llm', 'vlm', 'image', 'video', 'audio')", name=op.f("ck_models_kind")
        ),
        sa.CheckConstraint(
            "hidden_size > 0 AND num_layers > 0", name=op.f("ck_models_shape_positive")
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_models")),
    )
    op.create_table(
        "requests",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("app", sa.String(length=128), nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("workflow", sa.String(length=128), nullable=True),
        sa.Column("upstream", sa.String(length=128), nullable=True),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("arrival", sa.Double(), nullable=False),
        sa.Column("dispatched_at", sa.Double(), nullable=True),
        sa.Column("first_token_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("n_in", sa.Integer(), nullable=False),
        sa.Column("n_out", sa.Integer(), nullable=False),
        sa.Column("unified_cost", sa.Double(), nullable=False),
        sa.Column("slo_ttft_ms", sa.Double(), nullable=True),
        sa.Column("slo_tpot_ms", sa.Double(), nullable=True),
        sa.Column("slo_e2e_ms", sa.Double(), nullable=True),
        sa.Column("slo_violated", sa.Boolean(), nullable=False),
        sa.Column("ttft_ms", sa.Double(), nullable=True),
        sa.Column("tpot_ms", sa.Double(), nullable=True),
        sa.Column("e2e_ms", sa.Double(), nullable=True),
        sa.Column("queue_ms", sa.Double(), nullable=True),
        sa.Column("worker", sa.String(length=128), nullable=True),
        sa.Column("policy", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "status IN ('ok', 'error', 'aborted', 'timeout', 'withdrawn')",
            name=op.f("ck_requests_status"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_requests")),
    )
    op.create_index(op.f("ix_requests_arrival"), "requests", ["arrival"], unique=False)
    op.create_index(
        op.f("ix_requests_tenant_app_agent_arrival"),
        "requests",
        ["tenant", "app", "agent", "arrival"],
        unique=False,
    )
    op.create_index(
        op.f("ix_requests_tenant_arrival"), "requests", ["tenant", "arrival"], unique=False
    )

    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.Column("priority_tier", sa.Integer(), nullable=False),
        sa.Column("queue_cap", sa.Integer(), nullable=True),
        sa.Column("rate_limit_rps", sa.Double(), nullable=True),
        sa.Column("token_budget", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("slo_ttft_ms", sa.Double(), nullable=True),
        sa.Column("slo_tpot_ms", sa.Double(), nullable=True),
        sa.Column("slo_e2e_ms", sa.Double(), nullable=True),
        sa.CheckConstraint("priority_tier >= 0", name=op.f("ck_tenants_tier_nonnegative")),
        sa.CheckConstraint("weight > 0", name=op.f("ck_tenants_weight_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("url", sa.String(length=512), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("profile", sa.String(length=128), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("max_num_seqs", sa.Integer(), nullable=True),
        sa.Column("registered_at", sa.Double(), nullable=False),
        sa.CheckConstraint("kind IN ('sim', 'vllm')", name=op.f("ck_workers_kind")),
        sa.CheckConstraint(
            "status IN ('active', 'draining', 'drained')", name=op.f("ck_workers_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
        sa.UniqueConstraint("url", name=op.f("uq_workers_url")),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_api_keys_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_index(op.f("ix_api_keys_tenant_id"), "api_keys", ["tenant_id"], unique=False)

    op.create_table(
        "applications",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("slo_ttft_ms", sa.Double(), nullable=True),
        sa.Column("slo_tpot_ms", sa.Double(), nullable=True),
        sa.Column("slo_e2e_ms", sa.Double(), nullable=True),
        sa.CheckConstraint("weight > 0", name=op.f("ck_applications_weight_positive")),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_applications_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_applications")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_applications_tenant_id_name")),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("app_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("weight", sa.Double(), nullable=False),
        sa.Column("priority_tier", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("slo_ttft_ms", sa.Double(), nullable=True),
        sa.Column("slo_tpot_ms", sa.Double(), nullable=True),
        sa.Column("slo_e2e_ms", sa.Double(), nullable=True),
        sa.CheckConstraint("weight > 0", name=op.f("ck_agents_weight_positive")),
        sa.ForeignKeyConstraint(
            ["app_id"],
            ["applications.id"],
            name=op.f("fk_agents_app_id_applications"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("app_id", "name", name=op.f("uq_agents_app_id_name")),
    )


def downgrade() -> None:
    op.drop_table("agents")
    op.drop_table("applications")
    op.drop_index(op.f("ix_api_keys_tenant_id"), table_name="api_keys")

    op.drop_table("api_keys")
    op.drop_table("workers")
    op.drop_table("tenants")
    op.drop_index(op.f("ix_requests_tenant_arrival"), table_name="requests")
    op.drop_index(op.f("ix_requests_tenant_app_agent_arrival"), table_name="requests")
    op.drop_index(op.f("ix_requests_arrival"), table_name="requests")

    op.drop_table("requests")
    op.drop_table("models")
    op.drop_table("fairness_rollups")
    op.drop_index(op.f("ix_audit_log_target_at"), table_name="audit_log")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")

    op.drop_table("audit_log")
