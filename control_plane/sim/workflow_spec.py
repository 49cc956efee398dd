"""Workflow templates of a scenario: multi-agent applications as closed loops (Kairos §5.6).

A template names its tenant and application, the agents (each with a request class and an
optional think time before it is called) and its entry agent; `steps` say where a finished
call of an agent leads:
- `branch`: at most one of `to`, chosen with the given probabilities (what is left of 1 ends
  that path): Router → Math 0.6 | Humanities 0.4;
- `parallel`: every agent of `to` at once (fan-out), each kept with its own probability;
- `sequence`: the agents of `to` one after another, each once the previous has finished — all
  of them called *by* the source agent (a router asking math, then humanities: siblings, not a
  chain);
- a step back to an earlier agent is a feedback loop (Engineer ⇄ QA): `max_times` caps how often
  the step fires in one workflow (a loop needs it), and `max_calls` caps the whole workflow.
With `include_upstream`, an agent's prompt also carries its upstream call's output.
Workflows arrive by the template's arrival process; each next call exists only once its
upstream call has finished (the simulator and `arbiter bench` issue it then).
"""

from __future__ import annotations

from typing import Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from control_plane.sim.arrivals import Gamma, OnOff, Piecewise, Poisson

WorkflowArrival = Poisson | Gamma | OnOff | Piecewise


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )


class WorkflowAgent(_Strict):
    cls: str = Field(alias="class")
    """The request class of this agent's calls (lengths, model, SLO)."""
    think_s: float = Field(0.0, ge=0)
    """Time between the upstream call's end and this call (agent code, tools)."""
    include_upstream: bool = False
    """The prompt also carries the upstream call's output tokens."""


class Target(_Strict):
    agent: str
    p: float = Field(1.0, gt=0, le=1)


class WorkflowStep(_Strict):
    source: str = Field(alias="from")
    to: list[Target] = Field(min_length=1)
    mode: Literal["branch", "parallel", "sequence"] = "branch"
    max_times: int | None = Field(None, ge=1)
    """How often this step may fire in one workflow (required on a loop)."""

    @model_validator(mode="after")
    def _probabilities(self) -> WorkflowStep:
        if self.mode == "branch" and sum(t.p for t in self.to) > 1.0 + 1e-9:
            raise ValueError(f"step from {self.source!r}: branch probabilities sum above 1")
        return self


class WorkflowTemplate(_Strict):
    name: str = Field(min_length=1)
    tenant: str
    app: str | None = None
    entry: str
    agents: dict[str, WorkflowAgent] = Field(min_length=1)
    steps: list[WorkflowStep] = Field(default_factory=list)
    arrival: WorkflowArrival = Field(discriminator="process")
    max_calls: int = Field(64, ge=1, le=1024)

    @model_validator(mode="after")
    def _agents_and_loops(self) -> WorkflowTemplate:
        known = set(self.agents)
        named = [self.entry] + [s.source for s in self.steps]
        named += [t.agent for s in self.steps for t in s.to]
        unknown = sorted(set(named) - known)
        if unknown:
            raise ValueError(f"workflow {self.name!r}: unknown agents {unknown}")
        if len({s.source for s in self.steps}) != len(self.steps):
            raise ValueError(f"workflow {self.name!r}: one step per source agent")
        graph = nx.DiGraph()
        for step in self.steps:
            graph.add_edges_from((step.source, t.agent) for t in step.to)
        for cycle in nx.simple_cycles(graph):
            if not any(self.step(a).max_times for a in cycle):  # type: ignore[union-attr]
                raise ValueError(
                    f"workflow {self.name!r}: the loop {' → '.join(cycle)} needs `max_times`"
                )
        return self

    def step(self, source: str) -> WorkflowStep | None:
        return next((s for s in self.steps if s.source == source), None)
