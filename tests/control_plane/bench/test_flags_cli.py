"""The bench flag checks on their own: the boundaries, and good values passing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer

from control_plane.bench import flags_cli as flags


@pytest.mark.parametrize(
    "minutes,sample_s,warmup_s,ok",
    [
        (30.0, 60.0, 180.0, True),  # the defaults: 28 samples after the warm-up
        (8.0, 60.0, 180.0, True),  # 180, 240, …, 480 s: exactly 6
        (7.0, 60.0, 180.0, False),
        (1.0, 5.0, 0.0, True),  # a short smoke run with a short period and no warm-up
        (0.4, 5.0, 0.0, False),  # 0, 5, …, 20 s: 5 samples
    ],
)
def test_a_soak_too_short_for_its_verdict_is_refused(
    minutes: float, sample_s: float, warmup_s: float, ok: bool
) -> None:
    problem = flags.soak_samples(minutes, sample_s, warmup_s)
    assert (problem is None) == ok, problem
    if problem:
        assert problem.startswith("--minutes: ") and "run at least" in problem


def test_the_least_soak_it_asks_for_passes() -> None:
    problem = flags.soak_samples(2.0, 30.0, 100.0)
    assert problem is not None
    least = float(problem.rsplit("at least ", 1)[1].split()[0])
    assert flags.soak_samples(least, 30.0, 100.0) is None


def test_numbers() -> None:
    assert flags.number("--x", 0.0, 0) is None
    assert flags.number("--x", None, 0, above=True) is None
    assert flags.number("--x", 0.0, 0, above=True) == "--x: must be a finite number > 0, got 0"
    assert flags.number("--x", float("-inf"), 0) is not None
    assert flags.each_at_least("--n", [1, 2], 1) is None
    assert flags.each_at_least("--n", None, 1) is None


def test_paths(tmp_path: Path) -> None:
    assert flags.output_file(tmp_path / "a" / "b" / "out.json") is None  # made when written
    assert flags.output_file(None) is None
    assert flags.directory(tmp_path / "new", "--state-dir") is None
    assert flags.directory(tmp_path, "--state-dir") is None
    (tmp_path / "f").write_text("")
    assert flags.directory(tmp_path / "f" / "sub", "--state-dir") == (
        f"--state-dir: {tmp_path / 'f' / 'sub'}: {tmp_path / 'f'} is a file, not a directory"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]  # the checks made nothing
    if Path("/proc/self").is_dir():  # refuses new files even to root, whose bits allow them
        problem = flags.output_file(Path("/proc/arbiter/out.json"))
        assert problem is not None and problem.startswith("--out: /proc/arbiter/out.json: /proc")


def test_up_json(tmp_path: Path) -> None:
    path = tmp_path / "up.json"
    path.write_text(json.dumps({"gateway_url": "http://h:1", "tenants": {"acme": "k"}}))
    assert flags.up_json(path, ("acme",)) is None
    assert "has no key of tenant globex" in str(flags.up_json(path, ("acme", "globex")))
    path.write_text("[]")
    assert "has no gateway_url" in str(flags.up_json(path, ("acme",)))
    assert "cannot read" in str(flags.up_json(tmp_path / "none.json", ("acme",)))


def test_plugins_and_scenarios() -> None:
    assert flags.policy("vtc") is None and flags.placement("least_loaded") is None
    assert flags.scenario("noisy-neighbour-short") is None
    assert flags.workflow_scenario("kairos-qa") is None
    assert "has no workflows" in str(flags.workflow_scenario("vtc-overload"))


def test_up_args_outside_the_arbiter_command_are_left_to_arbiter_up() -> None:
    assert flags.up_args(["--bogus"]) is None  # no `arbiter` group to parse them with
    assert flags.up_args(None) is None


def test_refuse_prints_one_line_per_problem(capsys: pytest.CaptureFixture[str]) -> None:
    flags.refuse([None, None])  # nothing wrong: returns
    with pytest.raises(typer.Exit) as exit_:
        flags.refuse(["--a: bad\n  really", None, "--b: worse"])
    assert exit_.value.exit_code == 2
    assert capsys.readouterr().err == "error: --a: bad really\nerror: --b: worse\n"


def test_a_path_through_a_link_that_leads_nowhere_is_refused(tmp_path: Path) -> None:
    """A dangling link on the way (a results folder linked to an unmounted disk) does not
    `exist`, so the probe walked past it to a writable parent and said yes; making the folder
    then fails (FileExistsError) after the runs. A link to a folder is fine."""
    (tmp_path / "real").mkdir()
    (tmp_path / "good").symlink_to(tmp_path / "real")
    (tmp_path / "gone").symlink_to(tmp_path / "missing")
    assert flags.directory(tmp_path / "good" / "sub", "--state-dir") is None
    assert flags.output_file(tmp_path / "good" / "out.json") is None
    with pytest.raises(FileExistsError):  # what the write would meet
        (tmp_path / "gone" / "sub").mkdir(parents=True, exist_ok=True)
    for problem in (
        flags.directory(tmp_path / "gone" / "sub", "--state-dir"),
        flags.directory(tmp_path / "gone", "--state-dir"),
        flags.output_file(tmp_path / "gone" / "out.json"),
    ):
        assert problem is not None and f"{tmp_path / 'gone'} is a link to " in problem, problem
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gone", "good", "real"]
