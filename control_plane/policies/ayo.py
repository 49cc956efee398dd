"""Ayo's baseline — fewest remaining stages first (docs/algorithms.md §19)."""

from __future__ import annotations

from typing import ClassVar

from control_plane.policies.agent_queues import AgentKey, AgentQueuesPolicy


class AyoPolicy(AgentQueuesPolicy):
    """Agents ordered by the stages left after them in their application's learned agent
    graph (the longest path to an exit, a loop counted once), fewest first; within an agent,
    the earliest workflow start first.

    Topology only: two agents at the same depth rank the same however long their remaining
    work takes — the gap Kairos's latency distributions close. Depths are re-read on the
    periodic tick after new workflows were learned.
    """

    name: ClassVar[str] = "ayo"

    _version: int = -1

    def rank(self, agent: AgentKey) -> float:
        return float(self.ctx.workflows.stages(agent))

    def learned(self, now: float) -> bool:
        version = self.ctx.workflows.version
        moved, self._version = version != self._version, version
        return moved
