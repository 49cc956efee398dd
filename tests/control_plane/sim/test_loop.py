"""The simulator runs the registry's policy objects, conserves requests and is deterministic."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from control_plane.core.scheduler_core import SchedulerCore
from control_plane.policies.registry import policy_class
from control_plane.sim.engine_loop import Simulator
from control_plane.sim.records import RequestRecord
from control_plane.sim.report import write_results
from control_plane.sim.runner import results_document, run_scenario
from control_plane.sim.setup import PolicySpec, build_setup
from control_plane.sim.workload import build_workload
from tests.control_plane.sim.builders import run, tiny, write_trace

FINAL = {"ok", "timeout", "withdrawn", "aborted"}


def one_at_a_time(
    tmp_path: Path, rows: list[tuple[float, int, int, str]], caps: list[int] | None = None
) -> dict[str, object]:
    """A scenario replaying `rows` on a worker that runs one request at a time."""
    trace = write_trace(tmp_path / "trace.csv", rows, caps=caps)
    return {
        "cluster": [{"profile": "llama3-8b-a100", "max_num_seqs": 1}],
        "tenants": [{"name": "a"}, {"name": "b"}],
        "workload": [{"tenant": "a", "arrival": {"process": "trace", "path": trace.name}}],
        "duration_s": 10,
    }


def dispatched(record: RequestRecord) -> float:
    assert record.dispatched is not None
    return record.dispatched


def dispatch_log(records: list[RequestRecord]) -> list[tuple[str, str, float]]:
    return [(r.tenant, r.id, round(dispatched(r), 4)) for r in sorted(records, key=dispatched)]


def test_switching_the_policy_changes_the_order_as_the_policy_says(tmp_path: Path) -> None:
    rows = [(0.0, 100, 10, "a"), (0.0, 100, 10, "a"), (0.0, 100, 10, "a"), (0.001, 100, 10, "b")]
    scenario = tiny(tmp_path, **one_at_a_time(tmp_path, rows))
    fcfs = dispatch_log(run(scenario, "fcfs").records)
    vtc = dispatch_log(run(scenario, "vtc").records)
    assert [t for t, _, _ in fcfs] == ["a", "a", "a", "b"]
    # VTC: b arrives at 1 ms, is lifted to a's counter (100 after a's prompt); when a's first
    # request ends a has also paid 2 x 10 output tokens, so b goes before a's second request.
    assert [t for t, _, _ in vtc] == ["a", "b", "a", "a"]
    assert fcfs[0][2] == vtc[0][2] == 0.0
    for log in (fcfs, vtc):  # one at a time: each dispatch waits for the previous request
        times = [at for _, _, at in log]
        assert all(later - earlier > 0.05 for earlier, later in itertools.pairwise(times))


def test_sjf_and_priority_follow_their_keys(tmp_path: Path) -> None:
    rows = [(0.0, 50, 5, "a"), (0.01, 100, 400, "a"), (0.01, 100, 20, "b"), (0.01, 100, 80, "a")]
    # SJF sees the clients' caps (no history yet), never the true lengths: it orders by cap.
    scenario = tiny(tmp_path, **one_at_a_time(tmp_path, rows, caps=[10, 500, 600, 450]))
    sjf = [(r.max_tokens, r.n_out) for r in sorted(run(scenario, "sjf").records, key=dispatched)]
    assert sjf == [(10, 5), (450, 80), (500, 400), (600, 20)]
    tiers = one_at_a_time(tmp_path, rows)
    tiers["tenants"] = [{"name": "a", "tier": 1}, {"name": "b", "tier": 0}]
    prio = run(tiny(tmp_path, **tiers), "priority").records
    assert [r.tenant for r in sorted(prio, key=dispatched)] == ["a", "b", "a", "a"]


def test_the_simulator_uses_the_registry_s_objects() -> None:
    scenario = tiny()
    for name in ("fcfs", "vtc", "exfairs", "hmfs"):
        setup = build_setup(scenario, PolicySpec(name, name))
        assert type(setup.dispatcher.policy) is policy_class(name)
    setup = build_setup(scenario, PolicySpec("v", "vtc", {"level": 3}))
    assert setup.dispatcher.policy.params.model_dump()["level"] == 3


def test_every_arrival_ends_exactly_once_even_under_overload() -> None:
    scenario = tiny(
        duration_s=40,
        drain_s=5,
        cluster=[{"profile": "llama3-8b-a100", "max_num_seqs": 4}],
        scheduler={"queue_timeout_s": 8},
    )
    specs = build_workload(scenario)
    setup = build_setup(scenario, PolicySpec("vtc", "vtc"))
    sim = Simulator(setup, specs)
    records = sim.run()
    assert [r.id for r in records] == [s.id for s in specs]
    statuses = {r.status for r in records}
    assert statuses <= FINAL and {"ok", "timeout", "withdrawn", "aborted"} <= statuses
    assert not sim.pending and not sim.active
    assert not sim.core.pending and not sim.core.running
    assert all(w.inflight == {} and w.inflight_tokens == 0 for w in sim.core.workers.values())
    ledger = setup.dispatcher.policy.ctx.ledger
    charged = sum(ledger.service((t,)) for t in ("a", "b"))
    assert charged == pytest.approx(sum(r.service() for r in records))
    stats = [ledger.stats((t,)) for t in ("a", "b")]
    finished = sum(s.completed for s in stats if s is not None)
    # every end counts in the fairness windows, a queue timeout too (never served: violated)
    assert finished == sum(r.status in ("ok", "aborted", "timeout") for r in records)
    for r in records:
        assert r.finished is not None
        if r.status == "ok":
            assert r.n_out == r.length and r.dispatched is not None
            assert r.arrival <= r.dispatched <= r.first_token <= r.finished  # type: ignore[operator]
        if r.status == "timeout":
            assert r.dispatched is None and r.finished - r.arrival >= 8


def test_same_seed_same_bytes_and_another_seed_differs(tmp_path: Path) -> None:
    policies = [PolicySpec("fcfs", "fcfs"), PolicySpec("exfairs", "exfairs")]
    paths = []
    for i, seed in enumerate((3, 3, 4)):
        doc, _ = run_scenario(tiny().with_overrides(seed=seed), policies)
        paths.append(write_results(doc, tmp_path / str(i)))
    first, again, other = (p.read_bytes() for p in paths)
    assert first == again
    assert first != other
    assert json.loads(first)["scenario"]["seed"] == 3


def test_results_document_holds_one_entry_per_policy_label() -> None:
    scenario = tiny()
    runs = [run(scenario, "vtc"), run(scenario, "hmfs")]
    doc = results_document(scenario, runs)
    assert list(doc["results"]) == ["vtc", "hmfs"]
    assert doc["results"]["hmfs"]["policy"] == "hmfs"


IMAGE_AND_TEXT: dict[str, object] = {
    "duration_s": 20,
    "drain_s": 120,
    "cluster": [{"profile": "sd-image-a100"}, {"profile": "llama3-8b-a100"}],
    "classes": {
        "image": {
            "model": "sd3-medium",
            "prompt": {"dist": "fixed", "value": 30},
            "output": {"dist": "fixed", "value": 28},
        },
        "chat": {
            "model": "llama3-8b",
            "prompt": {"dist": "fixed", "value": 200},
            "output": {"dist": "fixed", "value": 50},
        },
    },
    "workload": [
        {"tenant": "a", "class": "image", "arrival": {"process": "poisson", "rate": 0.5}},
        {"tenant": "b", "class": "chat", "arrival": {"process": "poisson", "rate": 2}},
    ],
}


class RecordingCore(SchedulerCore):
    """The live scheduler's core, noting which jobs a progress report charged."""

    reported: set[str]

    def progress_batch(self, reports: Sequence[tuple[str, int]], now: float) -> None:
        self.reported.update(job_id for job_id, _ in reports)
        super().progress_batch(reports, now)


def test_an_image_answer_is_charged_and_seen_whole_when_it_ends() -> None:
    # Live, /v1/images/generations answers once: the gateway reports no progress for it, so
    # the scheduler is charged its steps on completion and the client sees them at the end.
    scenario = tiny(**IMAGE_AND_TEXT)
    specs = build_workload(scenario)
    setup = build_setup(scenario, PolicySpec("vtc", "vtc"))
    core = RecordingCore(setup.dispatcher, controller=setup.controller)
    core.reported = set()
    records = Simulator(setup, specs, core=core).run()
    images = [r for r in records if r.model == "sd3-medium"]
    text = [r for r in records if r.model == "llama3-8b"]
    assert len(images) >= 4 and len(text) >= 20
    assert all(r.status == "ok" and r.n_out == 28 == r.max_tokens for r in images)
    assert all(r.first_token == r.finished for r in images)
    assert all(r.first_token is not None and r.first_token < r.finished for r in text)  # type: ignore[operator]
    assert not core.reported & {r.id for r in images}
    assert core.reported & {r.id for r in text}
    ledger = setup.dispatcher.policy.ctx.ledger
    assert ledger.service(("a",)) == pytest.approx(sum(r.service() for r in images))
