"""`arbiter bench workflows`: its arithmetic (edge frequencies as the orchestrator counts
them, the mean workflow latency over applications, the agreement verdict) and, end to end, a
short `kairos-qa` replayed live as closed-loop multi-agent clients beside its simulation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from control_plane.bench.workflows_live import (
    WorkflowsConfig,
    document,
    learned_frequencies,
    run,
    sent_frequencies,
)
from control_plane.core.job import Slo
from control_plane.core.plugins import UnknownPluginError
from control_plane.sim.records import RequestRecord
from control_plane.sim.workload import RequestSpec


def spec(wf: str, i: int, agent: str, upstream: str | None) -> RequestSpec:
    return RequestSpec(
        f"{wf}.{i}", 0.0, "campus", "qa", agent, "m", None, None, 10, 10, Slo(), 0,
        workflow=wf, upstream=upstream, after=None if upstream is None else f"{wf}.0",
    )  # fmt: skip


def record(s: RequestSpec, start: float, end: float) -> RequestRecord:
    r = s.record(1.0)
    r.arrival, r.dispatched, r.first_token, r.finished = start, start, start, end
    r.n_out, r.status = 10, "ok"
    return r


def qa() -> tuple[list[RequestSpec], list[RequestRecord]]:
    """Four workflows: the router calls math in three, humanities in one; in the last it
    also calls math a second time (two downstream calls of one router call)."""
    specs = []
    for k, agents in enumerate((["math"], ["math"], ["humanities"], ["math", "math"])):
        wf = f"qa-{k}"
        specs.append(spec(wf, 0, "router", None))
        specs += [spec(wf, i + 1, a, "router") for i, a in enumerate(agents)]
    records = [record(s, 0.0, 2.0 if s.upstream is None else 6.0) for s in specs]
    return specs, records


def test_sent_frequencies_count_edges_over_the_upstream_s_calls() -> None:
    specs, records = qa()
    got = sent_frequencies(records, specs)
    assert got == {"campus/qa": {"router->math": 4 / 4, "router->humanities": 1 / 4}}
    plain = replace(specs[0], id="chat", workflow=None, upstream=None)
    assert sent_frequencies([*records, plain.record(1.0)], [*specs, plain]) == got


def test_learned_frequencies_read_the_admin_document() -> None:
    learned = {
        "data": [
            {
                "tenant": "campus",
                "app": "qa",
                "edges": [{"from": "router", "to": "math", "frequency": 0.52, "count": 13}],
            }
        ]
    }
    assert learned_frequencies(learned) == {"campus/qa": {"router->math": 0.52}}
    assert learned_frequencies({}) == {}


def test_the_verdict_compares_the_mean_workflow_latency() -> None:
    specs, records = qa()
    slower = [replace_end(r, 2.0) for r in records]
    cfg = WorkflowsConfig(tolerance=0.2)
    same = document(cfg, specs, records, records, {}, None)
    assert same["agree"] and same["mean_e2e_s"]["relative"] == 0.0
    assert same["mean_e2e_s"]["live"] == pytest.approx(6.0)
    apart = document(cfg, specs, slower, records, {}, None)  # live 8 s against 6 s
    assert not apart["agree"] and apart["mean_e2e_s"]["relative"] == pytest.approx(2 / 6)
    assert apart["programs"]["live"]["campus/qa"]["completed"] == 4


def replace_end(r: RequestRecord, delay: float) -> RequestRecord:
    copy = RequestRecord(**{f: getattr(r, f) for f in r.__dataclass_fields__})
    copy.finished = (r.finished or 0.0) + delay
    return copy


@pytest.mark.e2e
@pytest.mark.slow
def test_kairos_qa_live_agrees_with_its_simulation(tmp_path: Path) -> None:
    cfg = WorkflowsConfig(scenario="kairos-qa", duration_s=8.0, speed=0.5)
    doc = run(cfg, tmp_path / "state")
    assert doc["statuses"] == {"ok": doc["calls"]}
    m = doc["mean_e2e_s"]
    assert doc["agree"], m
    sent, learned = doc["frequencies"]["sent"]["campus/qa"], doc["frequencies"]["learned"]
    for edge in ("router->math", "router->humanities"):
        assert abs(learned["campus/qa"][edge] - sent[edge]) <= 0.05, (edge, sent, learned)
    sql = {row["key"]: row for row in doc["sql_programs"]["data"]}
    live = doc["programs"]["live"]["campus/qa"]
    assert sql["campus/qa"]["workflows"] == live["workflows"]


@pytest.mark.parametrize(("field", "value"), [("policy", "nosuch"), ("placement", "nowhere")])
def test_an_unknown_plug_in_is_refused_before_anything_starts(
    tmp_path: Path, field: str, value: str
) -> None:
    cfg = replace(WorkflowsConfig(scenario="kairos-qa"), **{field: value})
    with pytest.raises(UnknownPluginError, match=value):
        run(cfg, tmp_path / "state")
    assert not (tmp_path / "state").exists()
