"""The workflow orchestrator: what the scheduler learns online from finished calls (Kairos
§5.2–§5.4, docs/algorithms.md §19).

Fed by the dispatcher — every arrival, withdrawal and finish, under whatever policy runs — it
keeps the calls of each open workflow; a workflow is *closed* once none of its calls is queued
or running and none has ended for `idle_s` (agent code gives no other end signal). A closed
workflow is reconstructed (`calls.reconstruct`), merged into its application's agent graph,
and gives each of its calls a single-call latency and a remaining-latency sample. At most
every `recompute_s`, when a policy asks (`refresh`), the agents' priority scores are
recomputed (`mds.agent_scores`) from each agent's remaining-latency window, or its
application's pooled window while the agent's has not converged.

Rule: no I/O, time comes in as `now`; memory is bounded (a window per agent and application,
at most `max_open` open workflows of at most `max_calls` calls each — beyond that the least
recently active open workflow is closed early, on the arrival that found the table full). The
learned state is JSON (`snapshot`/`restore`) so a new leader keeps it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from control_plane.core.job import Job
from control_plane.core.workflows.agent_graph import AgentGraph
from control_plane.core.workflows.calls import Call, WorkflowGraph, reconstruct
from control_plane.core.workflows.mds import agent_scores
from control_plane.core.workflows.samples import Samples
from control_plane.core.workflows.views import learned as learned_view

AppKey = tuple[str, str]
"""(tenant, application)."""
AgentKey = tuple[str, str, str]
"""(tenant, application, agent): a job's `path`."""
MIN_KDE = 8
"""Single-call samples before an agent's latency mode is estimated."""


def kde_mode(values: np.ndarray) -> float:
    """The argmax of a Gaussian KDE of `values` on a 128-point grid (the sample itself when
    all values are equal, where a KDE is undefined)."""
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        return low
    # imported here: scipy.stats is ~90 MB, and the gateways import this module (knob rules)
    # without ever estimating a mode
    from scipy.stats import gaussian_kde

    grid = np.linspace(low, high, 128)
    return float(grid[int(np.argmax(gaussian_kde(values)(grid)))])


@dataclass
class _Open:
    app: AppKey
    start: float
    calls: list[Call] = field(default_factory=list)
    outstanding: int = 0
    """Calls arrived and not yet ended (queued or running): the workflow is not idle."""
    last: float = 0.0
    partial: bool = False
    held: int = 0
    """When a tick moved it to `Orchestrator._stale` (ticks number them in activity order)."""
    """Seen from mid-way (its first calls ran before a leader fail-over): its graph and
    remaining latencies would be wrong, so only its calls' single-call latencies count."""


@dataclass
class AgentStats:
    """One agent's single-call and remaining-latency windows (seconds)."""

    single: Samples
    remaining: Samples


class Orchestrator:
    """Online agent graphs, latency distributions and priority scores (module docstring)."""

    def __init__(
        self,
        window: int = 512,
        tolerance: float = 0.05,
        idle_s: float = 10.0,
        recompute_s: float = 5.0,
        max_open: int = 20_000,
        max_calls: int = 256,
    ) -> None:
        self.window, self.tolerance = window, tolerance
        self.idle_s, self.recompute_s = idle_s, recompute_s
        self.max_open, self.max_calls = max_open, max_calls
        self.graphs: dict[AppKey, AgentGraph] = {}
        self.agents: dict[AgentKey, AgentStats] = {}
        self.pooled: dict[AppKey, Samples] = {}
        self.scores: dict[AgentKey, float] = {}
        """The latest priority score per agent (lower = served sooner)."""
        self.scored_at: float | None = None
        self.version = 0
        """How many workflows have been learned (a policy re-reads graphs when it moves)."""
        self._open: OrderedDict[tuple[str, str, str], _Open] = OrderedDict()
        """Open workflows in order of last activity, after those of `_stale` (an ordered
        dict: a walk from the front does not pass over the places of those that left)."""
        self._stale: dict[tuple[str, str, str], _Open] = {}
        """Open workflows a tick found idle but with calls outstanding, in order of last
        activity; they precede every workflow of `_open` (only a touch takes one out, to the
        end of `_open`), so a tick need not walk them again."""
        self._quiet: dict[tuple[str, str, str], int] = {}
        """The workflows of `_stale` with no call outstanding any more → their `held`."""
        self._held = 0
        self._ticked: tuple[float, float] = (-math.inf, idle_s)
        """`now` and `idle_s` of the last tick: `_stale` is valid while neither goes back."""
        self._stages: dict[AppKey, dict[str, int]] = {}
        self._modes: dict[AgentKey, tuple[int, float]] = {}

    # -- feeding ----------------------------------------------------------------------------
    def _key(self, job: Job) -> tuple[str, str, str]:
        return (job.tenant, job.app, job.workflow or f"solo:{job.id}")

    def on_arrival(self, job: Job, now: float) -> float:
        """A call arrived: returns its workflow's start (the first call's arrival as the
        scheduler saw it, or the start the request carried if earlier)."""
        key = self._key(job)
        wf = self._find(key)
        if wf is None:
            self._evict_if_full()
            carried = job.workflow_start
            start = job.arrival if carried is None else min(job.arrival, carried)
            wf = self._open[key] = _Open(
                (job.tenant, job.app), start, last=now, partial=job.upstream is not None
            )
        wf.outstanding += 1
        self._touch(key, wf, now)
        return wf.start

    def on_withdrawn(self, job: Job) -> None:
        """A call left the queue without running (client gone, timeout)."""
        key = self._key(job)
        wf = self._find(key)
        if wf is not None:
            wf.outstanding = max(0, wf.outstanding - 1)
            if wf.outstanding == 0 and key in self._stale:
                self._quiet[key] = wf.held

    def on_finish(self, job: Job, n_out: int, now: float) -> None:
        """A call ended (any status: an aborted call still took its time in the workflow)."""
        key = self._key(job)
        wf = self._find(key)
        if wf is None:  # arrived before a fail-over: count the workflow from here
            self._evict_if_full()
            carried = job.workflow_start
            start = job.arrival if carried is None else carried
            wf = self._open[key] = _Open((job.tenant, job.app), start, partial=True)
        else:
            wf.outstanding = max(0, wf.outstanding - 1)
        start = job.dispatched_at if job.dispatched_at is not None else job.arrival
        wf.calls.append(Call(job.id, job.agent, job.upstream, start, max(now, start), n_out))
        self._touch(key, wf, now)
        if len(wf.calls) >= self.max_calls:
            self._close(key)

    def _find(self, key: tuple[str, str, str]) -> _Open | None:
        wf = self._open.get(key)
        return wf if wf is not None or not self._stale else self._stale.get(key)

    def _touch(self, key: tuple[str, str, str], wf: _Open, now: float) -> None:
        wf.last = max(wf.last, now)
        if self._stale and self._stale.pop(key, None) is not None:
            self._quiet.pop(key, None)
            self._open[key] = wf  # to the end: the most recently active
        else:
            self._open.move_to_end(key)

    def _evict_if_full(self) -> None:
        if len(self._open) + len(self._stale) >= self.max_open:
            self._close(next(iter(self._stale or self._open)))  # the least recently active

    # -- learning ---------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Close the workflows idle for `idle_s`: they are in order of last activity, so the
        walk stops at the first one active since (calls running longer are skipped).

        The skipped ones stay idle while the clock does not go back (their `last` is not
        touched while they wait in `_stale`), so they are not walked again: those whose calls
        were withdrawn since (`_quiet`) are closed first, in their order, then the walk goes
        on through `_open`. The workflows closed, and their order, are those of one walk over
        all of them.
        """
        if self._stale and (now < self._ticked[0] or self.idle_s > self._ticked[1]):
            self._unstale()  # the clock went back, or the idle time grew: walk them all
        self._ticked = (now, self.idle_s)
        idle = sorted(self._quiet, key=self._quiet.__getitem__)
        held = []
        for key, wf in self._open.items():
            if now - wf.last < self.idle_s:
                break
            if wf.outstanding == 0:
                idle.append(key)
            else:
                held.append(key)
        for key in held:
            wf = self._stale[key] = self._open.pop(key)
            self._held += 1
            wf.held = self._held
        for key in idle:
            self._close(key)

    def _unstale(self) -> None:
        self._open = OrderedDict([*self._stale.items(), *self._open.items()])
        self._stale.clear()
        self._quiet.clear()

    def refresh(self, now: float) -> bool:
        """Recompute the scores when `recompute_s` has passed since the last time; True when
        it did. Only the policies that read scores call it (nothing is computed otherwise)."""
        if self.scored_at is not None and now - self.scored_at < self.recompute_s:
            return False
        self.recompute(now)
        return True

    def _close(self, key: tuple[str, str, str]) -> None:
        wf = self._open.pop(key, None)
        if wf is None:
            wf = self._stale.pop(key)
            self._quiet.pop(key, None)
        if not wf.calls:
            return
        calls = wf.calls
        if wf.partial:
            for call in calls:
                self._stats((*wf.app, call.agent)).single.add(call.end - call.start)
            return
        # most workflows are one call (a request without one gets its own): nothing to sweep
        graph = (
            WorkflowGraph((calls[0],), (), (calls[0].id,))
            if len(calls) == 1
            else reconstruct(calls)
        )
        self.graphs.setdefault(wf.app, AgentGraph()).add(graph)
        self._stages.pop(wf.app, None)
        self.version += 1
        remaining = graph.remaining()
        pooled = self.pooled.get(wf.app)
        if pooled is None:
            pooled = self.pooled[wf.app] = Samples(self.window, self.tolerance)
        for call in graph.calls:
            stats = self._stats((*wf.app, call.agent))
            stats.single.add(call.end - call.start)
            stats.remaining.add(remaining[call.id])
            pooled.add(remaining[call.id])

    def _stats(self, key: AgentKey) -> AgentStats:
        stats = self.agents.get(key)
        if stats is None:
            stats = AgentStats(
                Samples(self.window, self.tolerance), Samples(self.window, self.tolerance)
            )
            self.agents[key] = stats
        return stats

    def distribution(self, key: AgentKey) -> np.ndarray:
        """The remaining-latency samples that rank `key`: its own once converged, else its
        application's pooled window (empty when the application has none yet)."""
        stats = self.agents.get(key)
        if stats is not None and stats.remaining.converged:
            return stats.remaining.array()
        pooled = self.pooled.get((key[0], key[1]))
        return pooled.array() if pooled is not None else np.zeros(0)

    def single_call_mode(self, key: AgentKey) -> float | None:
        """The most likely single-call latency of `key` (the argmax of a Gaussian KDE over
        its window, scipy), None before `MIN_KDE` samples; recomputed once a quarter of the
        window (or, while it fills, of the count seen) has been replaced since the last time,
        so a changed latency shows within a window however long the agent has run."""
        stats = self.agents.get(key)
        if stats is None or len(stats.single.values) < MIN_KDE:
            return None
        cached = self._modes.get(key)
        if cached is not None:
            step = max(1, min(cached[0], stats.single.window) // 4)
            if stats.single.seen < cached[0] + step:
                return cached[1]
        mode = kde_mode(stats.single.array())
        self._modes[key] = (stats.single.seen, mode)
        return mode

    def recompute(self, now: float) -> None:
        self.scores = agent_scores({k: self.distribution(k) for k in self.agents})
        self.scored_at = now

    def score(self, key: AgentKey) -> float:
        """`key`'s score; an agent not scored yet takes the median of its application's
        agents' scores, and an application never seen the median of all scores (0 with
        none)."""
        known = self.scores.get(key)
        if known is not None:
            return known
        same_app = [v for k, v in self.scores.items() if k[:2] == key[:2]]
        pool = same_app or list(self.scores.values())
        return float(np.median(pool)) if pool else 0.0

    def stages(self, key: AgentKey) -> int:
        """Remaining stages after `key` in its application's learned graph (Ayo); 0 unknown."""
        app = (key[0], key[1])
        stages = self._stages.get(app)
        if stages is None:
            graph = self.graphs.get(app)
            stages = self._stages[app] = graph.stages() if graph is not None else {}
        return stages.get(key[2], 0)

    # -- views ------------------------------------------------------------------------------
    def learned(self) -> list[dict[str, Any]]:
        """Per application, what was learned and how it is used (`views.learned`): the agent
        graph, each agent's windows as quantiles, convergence, single-call mode, remaining
        stages and priority score (`priority`: 1 = served first)."""
        return learned_view(self)

    # -- checkpoint -------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """What was learned (graphs, windows, scores); open workflows are not kept."""
        return {
            "graphs": [[*app, g.to_json()] for app, g in self.graphs.items()],
            "agents": [
                [*key, s.single.to_json(), s.remaining.to_json()] for key, s in self.agents.items()
            ],
            "pooled": [[*app, s.to_json()] for app, s in self.pooled.items()],
            "scores": [[*key, v] for key, v in self.scores.items()],
        }

    def restore(self, data: Any) -> None:
        """Reload `snapshot()` all at once: a malformed part raises before anything changes
        (the caller then starts the orchestrator fresh)."""
        if not isinstance(data, dict):
            return
        w, tol = self.window, self.tolerance
        graphs = {(t, a): AgentGraph.from_json(g) for t, a, g in data.get("graphs", [])}
        agents = {
            (t, a, g): AgentStats(Samples.from_json(s, w, tol), Samples.from_json(r, w, tol))
            for t, a, g, s, r in data.get("agents", [])
        }
        pooled = {(t, a): Samples.from_json(s, w, tol) for t, a, s in data.get("pooled", [])}
        scores = {(t, a, g): float(v) for t, a, g, v in data.get("scores", [])}
        self.graphs, self.agents, self.pooled, self.scores = graphs, agents, pooled, scores
        self._stages, self._modes = {}, {}
