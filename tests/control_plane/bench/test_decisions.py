"""`arbiter bench decisions`: every policy measured, same seed → same decisions, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from control_plane.bench.cli import register
from control_plane.bench.decisions import Size, leaf_paths, measure_policy, tree_shape
from control_plane.policies.registry import names


def bench() -> typer.Typer:
    group = typer.Typer()
    register(group)
    return group


def test_tree_shapes_follow_the_issue_sizes() -> None:
    assert tree_shape(10_000) == (100, 10, 10)
    assert tree_shape(1_000) == (10, 10, 10)
    assert tree_shape(50) == (50, 1, 1)
    assert len(leaf_paths("hmfs", 1_000)) == 1_000
    assert len(set(leaf_paths("vtc", 300))) == 300


def test_every_policy_is_timed_and_the_backlog_stays_full() -> None:
    for policy in names():
        row = measure_policy(policy, Size(leaves=20, jobs_per_leaf=3), pops=40)
        assert row["queued"] == 60
        assert row["pop"]["n"] == 40
        assert row["push"]["n"] == 60 + 40  # the fill, then one arrival per decision
        assert row["charge"]["n"] == 80
        assert 0 < row["pop"]["p50_us"] <= row["pop"]["p99_us"] <= row["pop"]["max_us"]


def test_the_command_prints_a_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    result = CliRunner().invoke(
        bench(),
        [
            "decisions",
            "--policy",
            "vtc",
            "--policy",
            "hmfs",
            "--leaves",
            "100",
            "--jobs-per-leaf",
            "2",
            "--pops",
            "30",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Scheduling decision cost" in result.output
    rows = json.loads(out.read_text())["rows"]
    assert [(r["policy"], r["shape"]) for r in rows] == [("vtc", [100]), ("hmfs", [1, 10, 10])]


def test_an_unknown_policy_is_named() -> None:
    result = CliRunner().invoke(bench(), ["decisions", "--policy", "nope", "--pops", "1"])
    assert result.exit_code == 2
    assert "--policy" in result.output and "nope" in result.output
