"""CSV trace replay: lengths and senders from the file, times shifted and scaled."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from control_plane.cli import _register, app
from control_plane.sim.traces import TraceError, read_trace
from control_plane.sim.workload import build_workload
from tests.control_plane.sim.builders import run, scenario_dict, tiny, write_trace


def test_trace_rows_become_requests_in_order(tmp_path: Path) -> None:
    write_trace(tmp_path / "t.csv", [(100.5, 10, 5, "b"), (100.0, 20, 6, "a"), (103.0, 30, 7, "")])
    scenario = tiny(
        tmp_path,
        duration_s=3,
        workload=[
            {
                "tenant": "a",
                "class": "small",
                "arrival": {"process": "trace", "path": "t.csv", "time_scale": 2.0},
            }
        ],
    )
    specs = build_workload(scenario)
    assert [(s.arrival, s.tenant, s.n_in, s.n_out) for s in specs] == [
        (0.0, "a", 20, 6),
        (1.0, "b", 10, 5),
    ]  # the third row lands at 6 s, past the 3 s horizon
    assert specs[1].slo.ttft_s == 1  # tenant b's own SLO
    result = run(scenario, "fcfs")
    assert [r.n_out for r in result.records] == [6, 5]
    assert all(r.status == "ok" for r in result.records)


def test_trace_without_relative_time_keeps_timestamps(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.csv", [(2.0, 10, 5, "a"), (1.0, 10, 5, "a")])
    rows = read_trace(path, horizon=10.0, relative=False, start_s=1.0)
    assert [r.time for r in rows] == [2.0, 3.0]


def test_malformed_traces_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,prompt_tokens\n0,10\n")
    with pytest.raises(ValueError, match="missing column"):
        read_trace(bad, 10.0)
    bad.write_text("timestamp,prompt_tokens,output_tokens\n0,ten,1\n")
    with pytest.raises(ValueError, match="line 2"):
        read_trace(bad, 10.0)
    write_trace(tmp_path / "t.csv", [(0.0, 10, 5, "ghost")])
    scenario = tiny(
        tmp_path, workload=[{"tenant": "a", "arrival": {"process": "trace", "path": "t.csv"}}]
    )
    with pytest.raises(ValueError, match="unknown tenant"):
        build_workload(scenario)


def test_a_bad_trace_is_one_line_naming_it_on_the_command_line(tmp_path: Path) -> None:
    """Regression: a missing trace file, a bad row or a tenant the scenario lacks ended the
    command in a traceback (the trace is read only when the workload is built)."""
    scenario_path = tmp_path / "s.yaml"
    stream = {"tenant": "a", "class": "small", "arrival": {"process": "trace", "path": "t.csv"}}
    scenario_path.write_text(yaml.safe_dump(scenario_dict(workload=[stream])), encoding="utf-8")
    trace = tmp_path / "t.csv"
    _register()
    cases = [
        ("", "t.csv: cannot be read"),
        ("timestamp,prompt_tokens,output_tokens\nnan,10,5\n", "line 2: timestamp must be finite"),
        ("timestamp,prompt_tokens,output_tokens,tenant\n0,10,5,zed\n", "unknown tenant 'zed'"),
    ]
    for text, expected in cases:
        if text:
            trace.write_text(text, encoding="utf-8")
        result = CliRunner().invoke(app, ["sim", "run", str(scenario_path), "-p", "fcfs",
                                          "--out", str(tmp_path / "out")])  # fmt: skip
        assert result.exit_code == 2, result.output
        assert expected in result.output and "Traceback" not in result.output, result.output
        assert isinstance(result.exception, SystemExit)
    with pytest.raises(TraceError, match=r"workload\[0\]: trace t\.csv, row 0"):
        build_workload(tiny(tmp_path, workload=[stream]))
