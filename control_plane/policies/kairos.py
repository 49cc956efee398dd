"""Kairos — workflow-aware priority (docs/algorithms.md §19)."""

from __future__ import annotations

from typing import ClassVar

from control_plane.policies.agent_queues import AgentKey, AgentQueuesPolicy


class KairosPolicy(AgentQueuesPolicy):
    """Agents ordered by their learned priority score, the nearest to the zero-latency anchor
    first; within an agent, the earliest workflow start first.

    Scores come from the context's workflow orchestrator (`ctx.workflows`): the classical-MDS
    embedding of the agents' remaining-latency distributions, recomputed at most every
    `recompute_s` (5 s) from the periodic tick, never on a push or pop; the agents are re-sorted
    only then. With nothing learned yet every agent scores the same and the order is the
    workflows' start order. Optimises mean workflow latency; blind to tenants (compose it with
    a fair policy for shares).
    """

    name: ClassVar[str] = "kairos"

    def rank(self, agent: AgentKey) -> float:
        return self.ctx.workflows.score(agent)

    def learned(self, now: float) -> bool:
        return self.ctx.workflows.refresh(now)
