"""Request bodies of the admin API. Every change carries a non-blank `reason`; unknown fields
are rejected, and field constraints mirror the storage rules so that a bad value is refused
with a 422 naming the field before anything is written."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from control_plane.api.admin.deps import ReasonText

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")]
"""Tenant, application, agent and model names: the same rule the gateway applies to headers."""
Weight = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Millis = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]


class Change(BaseModel):
    """Any change: the reason is required and lands in the audit log."""

    model_config = ConfigDict(extra="forbid")

    reason: ReasonText

    def changes(self, *, exclude: set[str] | None = None) -> dict[str, Any]:
        """The fields the caller sent (an explicit null included), without `reason`."""
        return self.model_dump(exclude_unset=True, exclude={"reason", *(exclude or set())})


class NodeFields(Change):
    """Fields every node has: weight and SLO defaults (ms)."""

    weight: Weight | None = None
    slo_ttft_ms: Millis | None = None
    slo_tpot_ms: Millis | None = None
    slo_e2e_ms: Millis | None = None


class TenantFields(NodeFields):
    priority_tier: Count | None = None
    queue_cap: Count | None = None
    rate_limit_rps: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    token_budget: Count | None = None
    """Most input + output tokens per UTC day across every gateway; once reached, new requests
    get 429 `token_budget_exceeded` until 00:00 UTC. null = unlimited."""


class AgentFields(NodeFields):
    priority_tier: Count | None = None
    """Overrides the tenant's tier (it can only make the agent less urgent)."""


class TenantCreate(TenantFields):
    name: Name


class AppCreate(NodeFields):
    name: Name


class AgentCreate(AgentFields):
    name: Name


class WeightChange(Change):
    weight: Weight


class KeyCreate(Change):
    tenant: Name
    label: Annotated[str, StringConstraints(max_length=128)] | None = None


class ModelSpecIn(Change):
    kind: Literal["llm", "vlm", "image", "video", "audio"] = "llm"
    hidden_size: Annotated[int, Field(gt=0)]
    num_layers: Annotated[int, Field(gt=0)]
    unified_cost_factor: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    max_model_len: Annotated[int, Field(gt=0)] | None = None


class WorkerIn(Change):
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", max_length=512)]
    id: Name | None = None
    model: Annotated[str, StringConstraints(max_length=128)] | None = None
    kind: Literal["sim", "vllm"] = "sim"
    max_num_seqs: Annotated[int, Field(gt=0)] | None = None
    kv_tokens: Annotated[int, Field(gt=0)] | None = None
    profile: Annotated[str, StringConstraints(max_length=128)] | None = None


class PolicyChange(Change):
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    params: dict[str, Any] = Field(default_factory=dict)


class KnobChange(Change):
    value: Any
