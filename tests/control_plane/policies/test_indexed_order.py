"""The indexed VTC and HMFS pop exactly what a scan of every pending job would.

A reference recomputes the order from scratch before each pop (counters read from the ledger,
heads from the pending jobs); random pushes (new and re-queued older requests), pops with and
without refused models, withdrawals and charges must never make the two disagree.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.core.job import Job
from control_plane.core.ledger import Node
from control_plane.core.policy import Policy, PolicyContext
from control_plane.policies.registry import build_policy

Order = Callable[[Policy, dict[str, Job]], list[Job]]


def vtc_order(policy: Policy, pending: dict[str, Job]) -> list[Job]:
    ledger = policy.ctx.ledger
    return sorted(
        pending.values(), key=lambda j: (ledger.counter(j.path[:1]), j.arrival, j.seq, j.id)
    )


def hmfs_order(policy: Policy, pending: dict[str, Job]) -> list[Job]:
    ledger = policy.ctx.ledger

    def walk(parent: Node, jobs: list[Job]) -> list[Job]:
        if len(parent) == 3:
            return sorted(jobs, key=lambda j: (j.arrival, j.seq, j.id))
        kids: dict[Node, list[Job]] = {}
        for job in jobs:
            kids.setdefault(job.path[: len(parent) + 1], []).append(job)

        def key(kid: Node) -> tuple[float, float, int, str]:
            head = min((j.arrival, j.seq, j.id) for j in kids[kid])
            return (ledger.counter(kid), *head)

        return [job for kid in sorted(kids, key=key) for job in walk(kid, kids[kid])]

    return walk((), list(pending.values()))


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["push", "push", "push", "requeue", "pop", "pop", "refuse", "remove"]),
        st.integers(0, 2),  # tenant
        st.integers(0, 1),  # app / agent
        st.integers(0, 3),  # model
        st.integers(1, 400),  # tokens
    ),
    max_size=120,
)


def _run(name: str, order: Order, steps: list[tuple[str, int, int, int, int]]) -> None:
    policy = build_policy(name, PolicyContext())
    pending: dict[str, Job] = {}
    now = 100.0
    for seq, (op, tenant, sub, model, tokens) in enumerate(steps, start=1):
        now += 0.01
        if op in ("push", "requeue"):
            arrival = now if op == "push" else now - 50.0 - tokens  # an older, re-queued one
            job = Job(
                id=f"j{seq}",
                tenant=f"t{tenant}",
                app=f"a{sub}",
                agent=f"g{(sub + tenant) % 2}",
                model=f"m{model}",
                arrival=arrival,
                seq=seq,
                n_in=tokens,
                max_tokens=tokens,
            )
            policy.push(job, now)
            pending[job.id] = job
        elif op == "remove" and pending:
            victim = sorted(pending)[tokens % len(pending)]
            assert policy.remove(victim) is pending.pop(victim)
        elif op in ("pop", "refuse"):
            refused = {f"m{model}"} if op == "refuse" else set()
            expected = next((j for j in order(policy, pending) if j.model not in refused), None)
            taken = policy.pop(now, lambda j, refused=refused: j.model not in refused)  # type: ignore[misc]
            assert taken is expected
            if taken is not None:
                del pending[taken.id]
                if tokens % 2:  # uncharged pops keep counters tied: heads decide
                    policy.on_dispatch(taken, now)
                    policy.on_tokens(taken, tokens, now)
        assert len(policy) == len(pending)
    assert sorted(j.id for j in policy.jobs()) == sorted(pending)


@settings(max_examples=250, deadline=None)
@given(STEPS)
def test_vtc_pops_what_a_full_scan_would(steps: list[tuple[str, int, int, int, int]]) -> None:
    _run("vtc", vtc_order, steps)


@settings(max_examples=250, deadline=None)
@given(STEPS)
def test_hmfs_pops_what_a_full_scan_would(steps: list[tuple[str, int, int, int, int]]) -> None:
    _run("hmfs", hmfs_order, steps)
