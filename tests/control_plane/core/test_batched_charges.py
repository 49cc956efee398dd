"""Speed-ups that must not change a number: batched reports, shared records, model-aware scans.

Each test runs the same operations twice, once through the plain path (one `charge_output` or
`on_tokens` per job, `admit` as a bare function) and once through the fast one, and requires
identical snapshots (floats compared exactly, through their JSON text) and identical orders.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control_plane.core.admission import Admission
from control_plane.core.dispatcher import Dispatcher, PoolGate
from control_plane.core.job import Job, Outcome
from control_plane.core.ledger import Ledger, OutputCharge
from control_plane.core.policy import PolicyContext, StopPop, Weights
from control_plane.core.windows import SlidingWindow
from control_plane.core.worker_view import WorkerView
from control_plane.placement.registry import build_placement
from control_plane.policies.queues import JobQueue
from control_plane.policies.registry import build_policy, names
from tests.control_plane.policies.jobs import job

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PATHS = [(t, a, g) for t in ("t0", "t1") for a in ("a0", "a1") for g in ("g0", "g1")]
COSTS = st.sampled_from([1.0, 2.0, 0.1, 1 / 3, 2.5, 1e-3, 7.0, 1e9 + 0.7])
STEPS = st.sampled_from([0.0, 0.0, 0.05, 0.3, 1.0, 2.5])
MODELS = ("m0", "m1", "m2")

charge_st = st.tuples(st.integers(0, len(PATHS) - 1), st.integers(1, 3), COSTS)
ledger_ops = st.lists(
    st.one_of(
        st.tuples(st.just("report"), st.lists(charge_st, max_size=8), STEPS),
        st.tuples(st.just("report"), st.lists(charge_st, max_size=8), STEPS),
        st.tuples(st.just("input"), st.integers(0, len(PATHS) - 1), COSTS, STEPS),
        st.tuples(st.just("complete"), st.integers(0, len(PATHS) - 1), st.booleans(), STEPS),
        st.tuples(st.just("read"), st.integers(0, len(PATHS) - 1)),
    ),
    max_size=40,
)


def dump(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


class Reference:
    """The ledger's accounting as first written: every prefix charged at once, one at a time."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.nodes: dict[tuple[str, ...], dict[str, Any]] = {}

    def _node(self, node: tuple[str, ...]) -> dict[str, Any]:
        if node not in self.nodes:
            window = [SlidingWindow(self.window_s, 1.0) for _ in range(3)]
            self.nodes[node] = {"service": 0.0, "tokens_in": 0, "tokens_out": 0}
            self.nodes[node] |= {"completed": 0, "violations": 0, "windows": window}
        return self.nodes[node]

    def charge(self, path: tuple[str, ...], key: str, n: int, cost: float, now: float) -> None:
        for depth in (1, 2, 3):
            stats = self._node(path[:depth])
            stats["service"] += cost
            stats[key] += n
            stats["windows"][0].add(now, cost)

    def complete(self, path: tuple[str, ...], violated: bool, now: float) -> None:
        for depth in (1, 2, 3):
            stats = self._node(path[:depth])
            stats["completed"] += 1
            stats["windows"][1].add(now, 1.0)
            if violated:
                stats["violations"] += 1
                stats["windows"][2].add(now, 1.0)

    def snapshot(self) -> list[Any]:
        out = []
        for node, stats in sorted(self.nodes.items()):
            totals = {key: value for key, value in stats.items() if key != "windows"}
            out.append([list(node), totals, [w.to_json() for w in stats["windows"]]])
        return out

    def reads(self, path: tuple[str, ...], now: float) -> list[Any]:
        nodes = [self.nodes.get(path[:depth]) for depth in (1, 2, 3)]
        out: list[Any] = [[s["service"] if s else 0.0 for s in nodes]]
        for depth in (1, 2, 3):
            stats = self.nodes.get(path[:depth])
            if stats is None:
                out += [0.0, (0.0, 0.0, 0.0), None]
            else:
                totals = tuple(w.total(now) for w in stats["windows"])
                out += [stats["service"], totals, stats["tokens_out"]]
        return out


def snapshot_of(ledger: Ledger) -> list[Any]:
    out = []
    for node, stats in ledger.snapshot()["nodes"]:
        windows = [stats.pop(key) for key in ("w_service", "w_completed", "w_violations")]
        out.append([node, stats, windows])
    return out


def reads(ledger: Ledger, path: tuple[str, ...], now: float) -> list[Any]:
    out: list[Any] = [ledger.services([path[:depth] for depth in (1, 2, 3)])]
    for depth in (1, 2, 3):
        node = path[:depth]
        stats = ledger.stats(node)
        window = ledger.window(node, now)
        totals = (window.service, window.completed, window.violations)
        out += [ledger.service(node), totals, stats and stats.tokens_out]
    return out


@SETTINGS
@given(ops=ledger_ops, order=st.permutations(range(len(PATHS))))
def test_a_batched_report_reads_exactly_like_one_charge_per_job(
    ops: list[Any], order: list[int]
) -> None:
    reference, single, batched = Reference(3.0), Ledger(window_s=3.0), Ledger(window_s=3.0)
    paths = [PATHS[i] for i in order]  # paths appear in any order: records get shared, split
    dummy = job("x")
    now = 0.0
    for op in ops:
        if op[0] == "report":
            now += op[2]
            charges: list[OutputCharge] = [(dummy, paths[i], n, c) for i, n, c in op[1]]
            for _, path, n, cost in charges:
                reference.charge(path, "tokens_out", n, cost, now)
                single.charge_output(path, n, cost, now)
            if charges:
                batched.charge_outputs(charges, now)
        elif op[0] == "input":
            now += op[3]
            reference.charge(paths[op[1]], "tokens_in", 5, op[2], now)
            for ledger in (single, batched):
                ledger.charge_input(paths[op[1]], 5, op[2], now)
        elif op[0] == "complete":
            now += op[3]
            reference.complete(paths[op[1]], op[2], now)
            for ledger in (single, batched):
                ledger.record_completion(paths[op[1]], op[2], now)
        else:
            expected = reference.reads(paths[op[1]], now)
            assert reads(single, paths[op[1]], now) == expected
            assert reads(batched, paths[op[1]], now) == expected
    final = dump(reference.snapshot())
    assert dump(snapshot_of(single)) == final
    assert dump(snapshot_of(batched)) == final
    assert dump(snapshot_of(Ledger.from_snapshot(batched.snapshot()))) == final


counter_ops = st.lists(
    st.tuples(
        st.sampled_from(["sink", "sink", "sink", "add", "lift", "read"]),
        st.integers(0, 3),
        COSTS,
    ),
    max_size=40,
)


@SETTINGS
@given(ops=counter_ops)
def test_deferred_counter_amounts_sum_exactly_like_add_counter(ops: list[Any]) -> None:
    plain, deferred = Ledger(), Ledger()
    nodes = [("a",), ("b",), ("a", "x"), ("c", "y", "z")]
    for kind, index, amount in ops:
        node = nodes[index]
        if kind == "sink":
            plain.add_counter(node, amount)
            deferred.counter_sink(node)(amount)
        elif kind == "add":
            plain.add_counter(node, amount)
            deferred.add_counter(node, amount)
        elif kind == "lift":
            plain.lift(node, amount * 3)
            deferred.lift(node, amount * 3)
        else:
            assert plain.counter(node) == deferred.counter(node)
            assert plain.counters(nodes) == deferred.counters(nodes)
    assert plain.nodes_at(1) == deferred.nodes_at(1)
    assert dump(plain.snapshot()) == dump(deferred.snapshot())


class FitAdmission(Admission):
    """Admits a job when its prompt fits the worker's free tokens (a KV fence in miniature)."""

    name: ClassVar[str] = "fit"

    def admit(self, job: Job, worker: WorkerView, now: float) -> bool:
        return job.n_in <= worker.kv_tokens - worker.inflight_tokens


def weighted_context() -> PolicyContext:
    weights = Weights()
    weights.set(("t0",), 3.0)  # not a power of two: divided amounts are inexact floats
    weights.set(("t1", "a1"), 0.7)
    return PolicyContext(weights=weights)


def dispatcher(policy: str) -> Dispatcher:
    return Dispatcher(
        build_policy(policy, weighted_context()), FitAdmission(), build_placement("least_loaded")
    )


dispatch_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("push"), st.integers(0, len(PATHS) - 1), st.integers(1, 60), st.booleans()
        ),
        st.tuples(st.just("dispatch"), st.integers(0, 3)),
        st.tuples(st.just("report"), st.lists(st.integers(0, 4), min_size=1, max_size=6)),
        st.tuples(st.just("finish"), st.integers(0, 5)),
        st.tuples(st.just("weight"), st.sampled_from([0.5, 1.0, 3.0])),
    ),
    max_size=50,
)


@pytest.mark.parametrize("policy", ["vtc", "wfq", "hmfs", "fcfs", "exfairs", "rr"])
@SETTINGS
@given(ops=dispatch_ops)
def test_on_tokens_batch_equals_on_tokens_per_job(policy: str, ops: list[Any]) -> None:
    sides = [dispatcher(policy), dispatcher(policy)]
    running: list[list[Job]] = [[], []]
    now, serial = 0.0, 0
    for op in ops:
        now += 0.4
        if op[0] == "push":
            serial += 1
            tenant, app, agent = PATHS[op[1]]
            for d in sides:
                j = job(f"j{serial}", tenant, now, n_in=op[2], app=app, agent=agent, seq=serial)
                j.unit_factor = 0.3 if op[3] else 1.0
                d.push(j, now)
        elif op[0] == "dispatch":
            for d, run in zip(sides, running, strict=True):
                view = WorkerView(id="w", model="default", max_num_seqs=8, kv_tokens=40 * op[1])
                run += [x.job for x in d.drain(now, [view])]
        elif op[0] == "report":
            deltas = [(i, n) for i, n in enumerate(op[1]) if i < len(running[0])]
            for i, n in deltas:
                sides[0].on_tokens(running[0][i], n, now)
            sides[1].on_tokens_batch([(running[1][i], n) for i, n in deltas], now)
        elif op[0] == "weight":
            for d in sides:
                d.policy.ctx.weights.set(("t1",), op[1])
        elif running[0]:
            for d, run in zip(sides, running, strict=True):
                done = run.pop(op[1] % len(run))
                d.on_finish(done, Outcome("ok", done.n_in, done.n_out + 1), now)
        assert [j.id for j in running[0]] == [j.id for j in running[1]]
    plain, batched = (d.policy for d in sides)
    assert dump(plain.ctx.ledger.snapshot()) == dump(batched.ctx.ledger.snapshot())
    assert dump(plain.snapshot()) == dump(batched.snapshot())


class PlainAdmit:
    """The same gate without its `refuses` query: every job is offered to `admit`."""

    def __init__(self, gate: PoolGate) -> None:
        self._gate = gate

    def __call__(self, job: Job) -> bool:
        return self._gate(job)


pool_ops = st.lists(
    st.tuples(
        st.integers(0, len(PATHS) - 1),
        st.integers(0, len(MODELS) - 1),
        st.integers(1, 60),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=40,
)


@pytest.mark.parametrize("policy", names())
@SETTINGS
@given(pushes=pool_ops, pools=st.sets(st.sampled_from(MODELS)), room=st.integers(0, 60))
def test_skipping_refused_models_pops_the_same_jobs(
    policy: str, pushes: list[Any], pools: set[str], room: int
) -> None:
    sides = [build_policy(policy, PolicyContext()), build_policy(policy, PolicyContext())]
    for serial, (path, model, n_in, tier) in enumerate(pushes):
        tenant, app, agent = PATHS[path]
        for side in sides:
            j = job(f"j{serial}", tenant, serial / 3, n_in=n_in, app=app, agent=agent, tier=tier)
            j.model = MODELS[model]
            side.push(j, 0.0)
    views = {m: [WorkerView(id=m, model=m, max_num_seqs=9, kv_tokens=room)] for m in pools}
    popped: list[list[str | None]] = [[], []]
    for _ in range(len(pushes) + 1):
        for side, out, hint in zip(sides, popped, (True, False), strict=True):
            gate = PoolGate(FitAdmission(), views, 0.0, hol_blocking=True)
            try:
                got = side.pop(0.0, gate if hint else PlainAdmit(gate))
            except StopPop:
                got = None
            out.append(got.id if got else None)
    assert popped[0] == popped[1]
    assert sorted(j.id for j in sides[0].jobs()) == sorted(j.id for j in sides[1].jobs())


@SETTINGS
@given(
    models=st.lists(st.sampled_from(MODELS), max_size=30),
    refused=st.sets(st.sampled_from(MODELS)),
)
def test_queue_candidates_leave_out_exactly_the_refused_models(
    models: list[str], refused: set[str]
) -> None:
    queue = JobQueue(lambda j: (float(j.n_in % 3),))
    for i, model in enumerate(models):
        j = job(f"j{i}", arrival=float(i % 4), n_in=i)
        j.model = model
        queue.add(j)
    kept = [entry for entry, j in queue.entries() if j.model not in refused]
    assert [entry for entry, _ in queue.candidates(refused.__contains__)] == kept
    assert [entry for entry, _ in queue.candidates(None)] == [e for e, _ in queue.entries()]
