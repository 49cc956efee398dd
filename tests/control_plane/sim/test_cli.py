"""`arbiter sim run|speed|capacity|compare|scenarios`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner, Result

from control_plane.sim import cli, speed_bench
from control_plane.sim.cli_args import parse_keys, parse_params, parse_policies
from control_plane.sim.phase_timer import PHASES
from tests.control_plane.sim.builders import scenario_dict


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    cli.register(app)
    return app


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(scenario_dict(duration_s=10, drain_s=30)), encoding="utf-8")
    return path


def test_simulate_writes_results_and_report(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(scenario_file),
            "--policy",
            "fcfs",
            "-p",
            "vtc3=vtc",
            "--param",
            "vtc3.level=3",
            "--param",
            "admission.token_fence=0.9",
            "--seed",
            "9",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert list(data["results"]) == ["fcfs", "vtc3"]
    assert data["results"]["vtc3"]["params"] == {"level": 3}
    assert data["results"]["vtc3"]["admission"]["params"]["token_fence"] == 0.9
    assert data["scenario"]["seed"] == 9
    assert (out / "report.html").stat().st_size > 100_000  # plotly.js is inlined


def test_several_files_get_one_directory_each(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(scenario_dict(name="other", duration_s=5, drain_s=10)))
    out = tmp_path / "many"
    result = CliRunner().invoke(
        app,
        ["run", str(scenario_file), str(other), "-p", "rr", "--out", str(out), "--no-report"],
    )
    assert result.exit_code == 0, result.output
    assert (out / "tiny" / "results.json").is_file() and (out / "other" / "results.json").is_file()
    assert not (out / "tiny" / "report.html").exists()


def test_bad_policy_params_are_reported(app: typer.Typer, scenario_file: Path) -> None:
    result = CliRunner().invoke(
        app, ["run", str(scenario_file), "-p", "vtc", "--param", "vtc.levle=2", "--out", "x"]
    )
    assert result.exit_code == 2, result.output
    assert "error: --policy vtc on tiny: invalid params for policy 'vtc': levle" in result.output
    assert "Traceback" not in result.output


def test_simulate_bench_prints_and_writes_the_speed(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "nested" / "speed.json"  # its folder is made
    result = CliRunner().invoke(app, ["speed", str(scenario_file), "-p", "vtc", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "requests / CPU-minute" in result.output
    data = json.loads(out.read_text())
    assert data["runs"][0]["requests"] > 50 and data["total"]["requests_per_cpu_minute"] > 0


def test_simulate_bench_split_prints_and_writes_every_phase(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "speed.json"
    args = ["speed", str(scenario_file), "-p", "vtc", "--split", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "tiny / vtc: CPU by phase" in result.output and "engine steps" in result.output
    assert "0.120 ms per request" in result.output
    run = json.loads(out.read_text())["runs"][0]
    assert [row["phase"] for row in run["phases"]] == list(PHASES)
    assert sum(row["cpu_s"] for row in run["phases"]) == pytest.approx(run["cpu_s"])
    assert sum(row["share"] for row in run["phases"]) == pytest.approx(1.0)
    plain = CliRunner().invoke(app, ["speed", str(scenario_file), "-p", "vtc", "--out", str(out)])
    assert "CPU by phase" not in plain.output
    assert json.loads(out.read_text())["runs"][0]["phases"] is None


def test_simulate_bench_writes_under_out_by_default(
    app: typer.Typer, scenario_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # like every benchmark: out/, which git ignores
    result = CliRunner().invoke(app, ["speed", str(scenario_file), "-p", "vtc"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "sim-speed.json").read_text())["runs"]
    assert not (tmp_path / "sim-speed.json").exists()


def test_capacity_and_scenario_listing(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["capacity", "noisy-neighbour-short"])
    assert result.exit_code == 0, result.output
    assert "llama3-8b" in result.output and "rho" in result.output
    listing = CliRunner().invoke(app, ["scenarios"])
    assert "exfairs-VI" in listing.output and "hmfs-multimodal" in listing.output


def test_option_parsers() -> None:
    params = parse_params(["vtc.level=3", "x.flag=true", "x.name=abc", "admission.token_fence=0.5"])
    assert params == {
        "vtc": {"level": 3},
        "x": {"flag": True, "name": "abc"},
        "admission": {"token_fence": 0.5},
    }
    specs = parse_policies(["vtc", "x=exfairs"], params)
    assert [(s.label, s.name, s.params) for s in specs] == [
        ("vtc", "vtc", {"level": 3}),
        ("x", "exfairs", {"flag": True, "name": "abc"}),
    ]
    with pytest.raises(ValueError, match="unique"):
        parse_policies(["vtc", "vtc"], {})
    with pytest.raises(ValueError, match="unknown policy label"):
        parse_policies(["vtc"], {"wfq": {"level": 1}})
    with pytest.raises(ValueError, match=r"POLICY\.KEY=VALUE"):
        parse_params(["level=3"])
    assert parse_keys(["alice=sk-1", "bob=sk=2"]) == {"alice": "sk-1", "bob": "sk=2"}


def test_compare_reports_per_tenant_agreement(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    for name, seed in (("one", "1"), ("two", "2"), ("three", "1")):
        args = ["run", str(scenario_file), "-p", "vtc", "--out", str(tmp_path / name)]
        assert CliRunner().invoke(app, [*args, "--seed", seed, "--no-report"]).exit_code == 0
    same = CliRunner().invoke(
        app,
        [
            "compare",
            str(tmp_path / "one" / "results.json"),
            str(tmp_path / "three" / "results.json"),
        ],
    )
    assert same.exit_code == 0 and "0.0%" in same.output
    other = CliRunner().invoke(
        app,
        [
            "compare",
            str(tmp_path / "one" / "results.json"),
            str(tmp_path / "two" / "results.json"),
            "--metric",
            "e2e_p99_s",
            "--tolerance",
            "0",
        ],
    )
    assert other.exit_code == 1 and "NO" in other.output
    one = str(tmp_path / "one" / "results.json")
    typo = CliRunner().invoke(app, ["compare", one, one, "--metric", "queue_mean"])
    assert typo.exit_code == 2 and "--metric: unknown metric 'queue_mean'" in typo.output
    folder = CliRunner().invoke(app, ["compare", str(tmp_path / "one"), one])
    assert folder.exit_code == 2 and "Traceback" not in folder.output


def test_live_speed_stretches_the_scheduler_s_clock(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    args = ["run", str(scenario_file), "-p", "vtc", "--no-report", "--out"]
    plain = CliRunner().invoke(app, [*args, str(tmp_path / "plain")])
    live = CliRunner().invoke(app, [*args, str(tmp_path / "live"), "--live-speed", "3"])
    assert plain.exit_code == 0 and live.exit_code == 0, live.output
    a, b = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("plain", "live"))
    sa, sb = a["scenario"]["scheduler"], b["scenario"]["scheduler"]
    assert sb["progress_s"] == pytest.approx(3 * sa["progress_s"])
    assert sb["tick_s"] == pytest.approx(3 * sa["tick_s"])
    assert sb["queue_timeout_s"] == pytest.approx(3 * sa["queue_timeout_s"])


def test_replay_refuses_missing_keys_before_writing_or_sending(
    app: typer.Typer, tmp_path: Path
) -> None:
    """Regression: a tenant without a key failed mid-replay with a traceback, after the SLO
    records of other tenants had been rewritten. The gateway here refuses connections, so an
    answer about it would show that something was sent first."""
    keys = tmp_path / "up.json"
    keys.write_text(json.dumps({"tenants": {"quiet-1": "k"}, "admin_token": "adm"}))
    args = ["replay", "noisy-neighbour-short", "--keys-file", str(keys), "--out", str(tmp_path)]
    result = CliRunner().invoke(app, [*args, "--gateway", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no API key for tenant(s) noisy, quiet-2" in lines[0], lines
    keys.write_text("[1, 2]")
    bad = CliRunner().invoke(app, args)
    assert bad.exit_code == 2 and "--keys-file" in bad.output and "Traceback" not in bad.output


def test_run_refuses_outputs_that_would_overwrite_before_any_run(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    """Regression: two files with one `name:` wrote to one directory, the second silently over
    the first; an --out that is a file failed only after every run."""
    twin = tmp_path / "copy.yaml"
    twin.write_text(scenario_file.read_text(encoding="utf-8"), encoding="utf-8")
    args = ["run", str(scenario_file), str(twin), "-p", "rr", "--no-report"]
    same = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "many")])
    assert same.exit_code == 2 and "several scenarios are named 'tiny'" in same.output
    assert not (tmp_path / "many").exists()
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    taken = CliRunner().invoke(app, [*args[:2], "-p", "rr", "--out", str(a_file)])
    assert taken.exit_code == 2 and "exists and is not a directory" in taken.output


def _arbiter(args: list[str]) -> Result:
    """`arbiter ARGS` as an operator runs it (its group turns input errors into one line)."""
    from control_plane.cli import _register
    from control_plane.cli import app as arbiter

    _register()
    return CliRunner().invoke(arbiter, args, terminal_width=200)


def _one_error_line(result: Result, start: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(start), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize(
    "late,expected",
    [
        (["no-such-scenario"], "no-such-scenario"),
        (["TRACED"], "t.csv: cannot be read"),
        (["-p", "nosuch"], "unknown policy 'nosuch'"),
    ],
)
def test_speed_checks_every_scenario_and_policy_before_any_run(
    scenario_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    late: list[str],
    expected: str,
) -> None:
    """Regression: `sim speed A B -p X -p Y` loaded B and built Y only after the runs before
    them, so a typo in the last scenario or policy failed after minutes of work."""

    def no_run(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a run started before every scenario and policy was checked")

    monkeypatch.setattr(speed_bench, "run_policy", no_run)
    stream = {"tenant": "a", "class": "small", "arrival": {"process": "trace", "path": "t.csv"}}
    traced = tmp_path / "traced.yaml"  # its trace file is missing
    traced.write_text(yaml.safe_dump(scenario_dict(name="traced", workload=[stream])))
    late = [str(traced) if arg == "TRACED" else arg for arg in late]
    out = tmp_path / "speed.json"
    args = ["sim", "speed", str(scenario_file), "-p", "vtc", *late, "--out", str(out)]
    assert expected in _one_error_line(_arbiter(args), "error: ")
    assert not out.exists()


@pytest.mark.parametrize(
    "args,start",
    [
        (["--admission", "nosuch"], "error: --admission: unknown admission 'nosuch'"),
        (["--placement", "nosuch"], "error: --placement: unknown placement 'nosuch'"),
        (["--param", "admission.zzz=1"], "error: --param admission."),
    ],
)
def test_run_names_the_plug_in_flag_that_is_wrong(
    scenario_file: Path, tmp_path: Path, args: list[str], start: str
) -> None:
    """Regression: `sim run --admission nosuch` said `error: --policy vtc on tiny: …`."""
    out = tmp_path / "out"
    result = _arbiter(["sim", "run", str(scenario_file), "-p", "vtc", *args, "--out", str(out)])
    _one_error_line(result, start)
    assert not out.exists()


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "0.0001", "1e308"])
def test_run_refuses_a_live_speed_that_is_not_a_usable_finite_number(
    scenario_file: Path, tmp_path: Path, value: str
) -> None:
    """Regression: `--live-speed inf` (or 1e308) ran every policy, then failed writing the
    results with a traceback; 0 was a multi-line usage panel."""
    out = tmp_path / "out"
    args = ["sim", "run", str(scenario_file), "-p", "vtc", "--out", str(out)]
    _one_error_line(_arbiter([*args, "--live-speed", value]), "error: --live-speed: ")
    assert not out.exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="/proc refuses new files (Linux)")
@pytest.mark.parametrize(
    "command",
    [
        ["sim", "run", "SCENARIO", "-p", "rr", "--out", "/proc/arbiter-out"],
        ["sim", "speed", "SCENARIO", "-p", "rr", "--out", "/proc/arbiter-out.json"],
        ["sim", "speed", "SCENARIO", "-p", "rr", "--out", "TMP"],
        ["sim", "replay", "SCENARIO", "--api-key", "k", "--out", "/proc/arbiter-out"],
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_run(
    scenario_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Regression: `sim run` and `sim replay` checked only that --out was no file, and `sim
    speed` nothing: a folder that refuses writes (permission bits do not say so to root; a
    read-only mount, /proc) failed with a traceback after every run, a replay's live run lost.
    The replay's gateway refuses connections: an answer about it would show it was tried."""

    def no_run(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a run started before --out was checked")

    monkeypatch.setattr(speed_bench, "run_policy", no_run)
    monkeypatch.setattr(cli, "run_policy", no_run)
    named = {"SCENARIO": str(scenario_file), "TMP": str(tmp_path)}
    args = [named.get(arg, arg) for arg in command]
    if "replay" in args:
        args += ["--gateway", "http://127.0.0.1:9"]
    line = _one_error_line(_arbiter(args), "error: --out ")
    assert "/proc is not writable" in line or "is a directory; give a file name" in line, line
