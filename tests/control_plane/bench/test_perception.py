"""`arbiter bench perception`: tagger cost and accuracy, length MAE and conformal coverage."""

from __future__ import annotations

import json
from pathlib import Path

from control_plane.bench.perception import run, write


def test_the_benchmark_reports_every_number_it_promises(tmp_path: Path) -> None:
    result = run(rounds=200, scenarios=("exfairs-I",))
    for t in result["timing"].values():
        assert 0 < t["p50_us"] <= t["p99_us"]
    assert 0.0 <= result["held_out"]["accuracy"] <= 1.0
    assert len(result["held_out"]["per_type"]) == 13
    lengths = result["lengths"]["exfairs-I"]
    assert lengths["answers"] > 100 and lengths["mae"] >= 0.0
    assert lengths["scored"] > 0 and 0.5 < lengths["coverage"] <= 1.0
    assert lengths["target"] == 0.95
    out = tmp_path / "bench.json"
    write(result, out)
    assert json.loads(out.read_text())["lengths"]["exfairs-I"]["answers"] == lengths["answers"]
