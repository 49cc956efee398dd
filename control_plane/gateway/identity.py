"""Who is asking, and with which weights, tier and SLO defaults (resolved at the door).

Priority and weights come from the tenant/app/agent records, never from what a caller claims.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SloDefaults:
    """Configured targets in ms (None = unset); precedence agent > app > tenant."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def over(self, fallback: SloDefaults) -> SloDefaults:
        """These defaults, falling back field by field to `fallback`."""
        return SloDefaults(
            ttft_ms=self.ttft_ms if self.ttft_ms is not None else fallback.ttft_ms,
            tpot_ms=self.tpot_ms if self.tpot_ms is not None else fallback.tpot_ms,
            e2e_ms=self.e2e_ms if self.e2e_ms is not None else fallback.e2e_ms,
        )


@dataclass(frozen=True, slots=True)
class TenantInfo:
    """A tenant as the gateway needs it (from SQL, cached).

    Limits (None = none): `queue_cap` queued requests, `rate_limit_rps` requests per second,
    `token_budget` tokens (prompt + completion) per UTC day.
    """

    name: str
    tier: int = 0
    weight: float = 1.0
    queue_cap: int | None = None
    rate_limit_rps: float | None = None
    token_budget: int | None = None
    slo: SloDefaults = SloDefaults()


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """The resolved tenant → app → agent path of one request."""

    tenant: TenantInfo
    app: str
    agent: str
    app_weight: float = 1.0
    agent_weight: float = 1.0
    tier: int = 0
    slo: SloDefaults = SloDefaults()

    def weights(self) -> dict[str, float]:
        return {"tenant": self.tenant.weight, "app": self.app_weight, "agent": self.agent_weight}
