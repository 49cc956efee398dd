"""Request bodies of the admin API. Every change carries a non-blank `reason`; unknown fields
are rejected, and field constraints mirror the storage rules so that a bad value is refused
with a 422 naming the field before anything is written."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from control_plane.api.admin.deps import NO_NUL, ReasonText
from control_plane.api.admin.worker_url import check_worker_url
from control_plane.contracts.knobs import PLUGIN_NAME_MAX
from control_plane.gateway.bounds import (
    Int64,
    Millis,
    Name,
    PositiveInt32,
    Rate,
    Tier,
    Weight,
)
from workers.engine.diffusion import GenerationRule
from workers.engine.vision import ImageTokenRule

Label = Annotated[str, StringConstraints(max_length=128, pattern=NO_NUL)]
Factor = Annotated[float, Field(strict=True, gt=0, le=1e6, allow_inf_nan=False)]


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
    priority_tier: Tier | None = None
    queue_cap: PositiveInt32 | None = None
    """Most requests of this tenant queued at once (≥ 1; null = the default cap)."""
    rate_limit_rps: Rate | None = None
    token_budget: Int64 | None = None
    """Most input + output tokens per UTC day across every gateway; once reached, new requests
    get 429 `token_budget_exceeded` until 00:00 UTC. null = unlimited."""


class AgentFields(NodeFields):
    priority_tier: Tier | None = None
    """Overrides the tenant's tier (it can only make the agent less urgent)."""


class TenantCreate(TenantFields):
    name: Name


class AppCreate(NodeFields):
    name: Name


class AgentCreate(AgentFields):
    name: Name


class WeightChange(Change):
    weight: Weight
    expected: Weight | None = Field(
        default=None,
        description="The weight as the caller read it (`GET /admin/hierarchy`): the change is "
        "made only while the node still has it (409 `node_changed` otherwise).",
    )


class KeyCreate(Change):
    tenant: Name
    label: Label | None = None


class ModelSpecIn(Change):
    kind: Literal["llm", "vlm", "image", "video", "audio"] = "llm"
    hidden_size: PositiveInt32
    num_layers: PositiveInt32
    unified_cost_factor: Factor | None = None
    max_model_len: PositiveInt32 | None = None
    image_tokens: ImageTokenRule | None = None
    """How the model counts an input image (VLMs): `patch_merge` or `fixed`."""
    generation: GenerationRule | None = None
    """Denoising steps per image and the sizes an image model generates."""


class WorkerIn(Change):
    url: Annotated[str, StringConstraints(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", max_length=512)]
    """`http(s)://host[:port][/path]`; without an `id`, `host:port` must also be a valid name."""
    id: Name | None = None
    model: Label | None = None
    kind: Literal["sim", "vllm"] = "sim"
    max_num_seqs: PositiveInt32 | None = None
    kv_tokens: PositiveInt32 | None = None
    profile: Label | None = None

    @field_validator("url")
    @classmethod
    def _valid_url(cls, value: str) -> str:
        return check_worker_url(value)


class PolicyChange(Change):
    name: Annotated[str, StringConstraints(min_length=1, max_length=PLUGIN_NAME_MAX)]
    params: dict[str, Any] = Field(default_factory=dict)
    expected: str | None = Field(
        None,
        description="The `policy` knob's stored JSON text as `GET /admin/policy` gave it under "
        "`expected` ('' = unset): the switch is then refused with 409 `knob_changed` if the "
        "policy changed since that read. Without it the switch goes over the current policy.",
    )


class KnobChange(Change):
    value: Any
    expected: str | None = Field(
        None,
        description="The knob's stored JSON text as `GET /admin/knobs` gave it under "
        "`expected` ('' = unset): the change is then refused with 409 `knob_changed` if the "
        "knob changed since that read. Without it the change goes over the current value.",
    )
