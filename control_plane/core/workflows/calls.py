"""One workflow rebuilt from its calls (Kairos §5.2, docs/algorithms.md §19.1).

A call carries its agent, the agent whose output triggered it (`upstream`, None for the entry
agent) and its execution span. The parent of a call is the call of its upstream agent, in the
same workflow, that ended last before the call started (an engineer ⇄ QA loop calls the same
agent several times: the latest finished round is the one that triggered this call). A parent's
downstream calls are then split by a sweep line over their spans: calls whose spans overlap
ran in *parallel*; the others ran *sequentially*. Sequential siblings stay siblings: several
calls that one router made one after the other are not a chain (the paper's Figure 11 trap),
because edges come only from `upstream`, never from the order in time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Call:
    """One finished call of a workflow: who ran, who triggered it, and when it executed."""

    id: str
    agent: str
    upstream: str | None
    start: float
    end: float
    n_out: int = 0


@dataclass(frozen=True, slots=True)
class Edge:
    """An upstream call → downstream call edge; `parallel` when its span overlapped a
    sibling's (another downstream call of the same parent)."""

    parent: str
    child: str
    parallel: bool


@dataclass(frozen=True, slots=True)
class WorkflowGraph:
    """A reconstructed workflow: its calls (by start), its edges and its root calls."""

    calls: tuple[Call, ...]
    edges: tuple[Edge, ...]
    roots: tuple[str, ...]

    @property
    def end(self) -> float:
        return max(c.end for c in self.calls)

    def remaining(self) -> dict[str, float]:
        """Per call: time from its start to the end of the workflow (Kairos's remaining
        latency; every observed path contributes, so frequent paths weigh more)."""
        end = self.end
        return {c.id: end - c.start for c in self.calls}


def reconstruct(calls: Iterable[Call]) -> WorkflowGraph:
    """The workflow that `calls` (all of one workflow id) form; see the module docstring."""
    ordered = sorted(calls, key=lambda c: (c.start, c.end, c.id))
    if not ordered:
        raise ValueError("a workflow has at least one call")
    parent = {c.id: _parent_of(c, ordered) for c in ordered}
    siblings: dict[str, list[Call]] = defaultdict(list)
    for call in ordered:
        p = parent[call.id]
        if p is not None:
            siblings[p].append(call)
    edges: list[Edge] = []
    for p, kids in siblings.items():
        overlapping = parallel_ids(kids)
        edges += [Edge(p, k.id, k.id in overlapping) for k in kids]
    roots = tuple(c.id for c in ordered if parent[c.id] is None)
    return WorkflowGraph(tuple(ordered), tuple(edges), roots)


def _parent_of(call: Call, ordered: Sequence[Call]) -> str | None:
    if call.upstream is None:
        return None
    before = [c for c in ordered if c.agent == call.upstream and c.id != call.id]
    finished = [c for c in before if c.end <= call.start]
    pool = finished or [c for c in before if c.start <= call.start]
    if not pool:
        return None  # the upstream call was never seen (lost, or before a fail-over)
    return max(pool, key=lambda c: (c.end, c.start, c.id)).id


def parallel_ids(calls: Sequence[Call]) -> set[str]:
    """Ids of the calls whose span overlaps another's: a sweep line over start/end points,
    ends before starts at the same instant (back-to-back calls are sequential)."""
    points = sorted(
        [(c.start, 1, c.id) for c in calls] + [(c.end, 0, c.id) for c in calls],
    )
    open_ids: set[str] = set()
    overlapping: set[str] = set()
    for _, is_start, cid in points:
        if not is_start:
            open_ids.discard(cid)
            continue
        if open_ids:
            overlapping |= open_ids | {cid}
        open_ids.add(cid)
    return overlapping
