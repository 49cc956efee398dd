"""A malformed scenario file: one line per problem naming the file and the field, no traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from control_plane.cli import _register, app
from control_plane.sim.scenario import SCENARIOS_DIR, load_scenario
from control_plane.sim.yaml_file import ScenarioError, read_yaml
from tests.control_plane.sim.builders import scenario_dict

SHIPPED = SCENARIOS_DIR / "noisy-neighbour-short.yaml"


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = SHIPPED.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "broken.yaml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def test_only_true_and_false_are_booleans(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("a: off\nb: yes\nc: true\nd: False\ne: n\n", encoding="utf-8")
    assert read_yaml(path) == {"a": "off", "b": "yes", "c": True, "d": False, "e": "n"}


def test_an_unknown_key_is_named_with_the_value_as_written(tmp_path: Path) -> None:
    path = _broken(tmp_path, "{name: quiet-1,", "{name: quiet-1, first: off,")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    assert str(caught.value) == (
        f"{path}: tenants.0.first: Extra inputs are not permitted (got 'off')"
    )


def test_yaml_syntax_errors_give_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\n  tenants: [\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: not valid YAML \(line 2, column 10\)"):
        load_scenario(str(path))


def test_the_cli_prints_the_lines_and_exits_2(tmp_path: Path) -> None:
    path = _broken(tmp_path, "{name: quiet-2,", "{name: quiet-2, weight: heavy,")
    _register()
    result = CliRunner().invoke(
        app, ["sim", "run", str(path), "-p", "fcfs", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "tenants.1.weight: Input should be a valid number" in result.output
    assert "(got 'heavy')" in result.output


def test_a_key_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    """Regression: PyYAML kept the last of two `chat:` classes (or `duration_s:`) silently."""
    path = tmp_path / "twice.yaml"
    path.write_text("name: x\nclasses:\n  chat: {}\n  chat: {}\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"\(line 4, column 3\): duplicate key 'chat'"):
        read_yaml(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"duration_s": float("inf")}, "duration_s: Input should be a finite number"),
        ({"name": ""}, "name: String should match pattern"),
        ({"tenants": [{"name": "b c"}]}, "tenants.0.name: String should match pattern"),
        ({"tenants": [{"name": "a", "tier": -3}]}, "tenants.0.tier: Input should be greater"),
        (
            {"tenants": [{"name": "a", "apps": [{"name": "x"}, {"name": "x"}]}]},
            "tenant 'a': apps: names must be unique, 'x' repeated",
        ),
        (
            {"classes": {"small": {"prompt": {"dist": "fixed", "value": 5, "min": 900, "max": 10},
                                   "output": {"dist": "fixed", "value": 5}}}},
            "classes.small.prompt.fixed: Value error, min (900) must not exceed max (10)",
        ),
        ({"mix_weight": float("nan")}, "workload.0.mix.small: Input should be a finite number"),
    ],
)  # fmt: skip
def test_nonsense_values_are_refused_naming_the_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    """Regression: each of these loaded, and infinities or NaN then hung or broke a run."""
    data = scenario_dict()
    if "mix_weight" in change:
        data["workload"][0] = {**data["workload"][0], "mix": {"small": change.pop("mix_weight")}}
        del data["workload"][0]["class"]
    data.update(change)
    if "tenants" in change:
        data["workload"] = [{**w, "tenant": "a"} for w in data["workload"]][:1]
    path = tmp_path / "nonsense.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    assert field in str(caught.value), caught.value


def test_merge_keys_still_merge_and_may_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text("a: &x {b: 1, c: 2}\nd:\n  <<: *x\n  b: 3\n", encoding="utf-8")
    assert read_yaml(path) == {"a": {"b": 1, "c": 2}, "d": {"b": 3, "c": 2}}
