"""A driver that applies random operations to a policy and checks the contract as it goes.

Operations are plain tuples so hypothesis can generate and shrink them:
`("push", tenant, app, agent, n_in, max_tokens, tier, slo, model, dt)`, `("pop", mode)`,
`("remove", index)`, `("tick", dt)`, `("finish", violated)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from control_plane.core.job import Job, Outcome, Slo
from control_plane.core.policy import Policy

Op = tuple[Any, ...]

SLOS = (Slo(), Slo(e2e_s=5.0), Slo(ttft_s=1.0, tpot_s=0.05), Slo(e2e_s=1.0, ttft_s=0.5))
ADMIT_MODES = ("all", "all", "none", "model0", "even", "tenant0", "small")


def admit_for(mode: str) -> Callable[[Job], bool]:
    """Admission predicates standing in for worker availability."""
    rules: dict[str, Callable[[Job], bool]] = {
        "all": lambda j: True,
        "none": lambda j: False,
        "model0": lambda j: j.model == "m0",
        "even": lambda j: j.seq % 2 == 0,
        "tenant0": lambda j: j.tenant == "t0",
        "small": lambda j: j.n_in <= 100,
    }
    return rules[mode]


push_op = st.tuples(
    st.just("push"),
    st.integers(0, 3),
    st.integers(0, 1),
    st.integers(0, 2),
    st.integers(1, 200),
    st.integers(1, 50),
    st.integers(0, 2),
    st.integers(0, len(SLOS) - 1),
    st.integers(0, 1),
    st.sampled_from([0.0, 0.0, 0.1, 1.5]),
)
ops_strategy = st.lists(
    st.one_of(
        push_op,
        push_op,
        st.tuples(st.just("pop"), st.sampled_from(ADMIT_MODES)),
        st.tuples(st.just("remove"), st.integers(0, 50)),
        st.tuples(st.just("tick"), st.sampled_from([0.5, 3.0, 6.0])),
        st.tuples(st.just("finish"), st.booleans()),
    ),
    max_size=60,
)


class Harness:
    """Runs ops against `policy`, mirroring what should be pending, and asserts the contract."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.now = 0.0
        self.count = 0
        self.pending: dict[str, Job] = {}
        self.running: list[Job] = []
        self.pushed: list[str] = []
        self.popped: list[str] = []
        self.removed: list[str] = []
        self.log: list[str | None] = []

    def run(self, ops: Sequence[Op]) -> None:
        for op in ops:
            getattr(self, "_" + op[0])(*op[1:])
            self.check_pending()

    def check_pending(self) -> None:
        ids = [j.id for j in self.policy.jobs()]
        assert len(ids) == len(set(ids)), "a job is listed twice"
        assert set(ids) == set(self.pending)
        assert len(self.policy) == len(self.pending)

    def _push(
        self, t: int, a: int, g: int, n_in: int, out: int, tier: int, slo: int, m: int, dt: float
    ) -> None:
        self.now += dt
        self.count += 1
        job = Job(
            id=f"j{self.count}",
            tenant=f"t{t}",
            arrival=self.now,
            n_in=n_in,
            max_tokens=out,
            app=f"a{a}",
            agent=f"g{g}",
            model=f"m{m}",
            seq=self.count,
            tier=tier,
            slo=SLOS[slo],
        )
        self.policy.push(job, self.now)
        self.pending[job.id] = job
        self.pushed.append(job.id)

    def _pop(self, mode: str) -> None:
        admit = admit_for(mode)
        job = self.policy.pop(self.now, admit)
        self.log.append(job.id if job else None)
        if job is None:
            assert not any(admit(j) for j in self.pending.values()), (
                "pop idled (not work-conserving)"
            )
            return
        assert admit(job), "pop returned an inadmissible job"
        assert self.pending.pop(job.id) is job
        self.popped.append(job.id)
        self.dispatch(job)

    def dispatch(self, job: Job) -> None:
        ctx = self.policy.ctx
        self.policy.on_dispatch(job, self.now)
        ctx.ledger.charge_input(job.path, job.n_in, ctx.cost.input_cost(job), self.now)
        self.running.append(job)

    def _remove(self, index: int) -> None:
        assert self.policy.remove("no-such-job") is None
        if not self.pending:
            return
        job_id = sorted(self.pending)[index % len(self.pending)]
        removed = self.policy.remove(job_id)
        assert removed is self.pending.pop(job_id)
        assert self.policy.remove(job_id) is None
        self.removed.append(job_id)
        self.log.append("-" + job_id)

    def _tick(self, dt: float) -> None:
        self.now += dt
        self.policy.tick(self.now)

    def _finish(self, violated: bool) -> None:
        if not self.running:
            return
        job = self.running.pop(0)
        ctx = self.policy.ctx
        self.policy.on_tokens(job, job.max_tokens, self.now)
        ctx.ledger.charge_output(
            job.path, job.max_tokens, ctx.cost.output_cost(job, job.max_tokens), self.now
        )
        ctx.ledger.record_completion(job.path, violated, self.now)
        status = "ok" if not violated else "timeout"
        self.policy.on_finish(job, Outcome(status, job.n_in, job.max_tokens), self.now)

    def drain(self) -> list[str]:
        """Pop everything (always admissible); check nothing was lost or duplicated."""
        out: list[str] = []
        while (job := self.policy.pop(self.now, lambda j: True)) is not None:
            assert self.pending.pop(job.id) is job
            out.append(job.id)
            self.dispatch(job)
        self.popped.extend(out)
        assert not self.pending
        assert len(self.policy) == 0 and list(self.policy.jobs()) == []
        assert sorted(self.popped + self.removed) == sorted(self.pushed)
        return out
