"""The fidelity procedure end to end, shortened, against the shared real vLLM server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.vllm_server import running_vllm, vllm_python
from workers.engine.profile import PROFILES_DIR, load_profile
from workers.vllm.fidelity import FidelityConfig, run_fidelity

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_short_fidelity_run_fits_writes_and_compares(tmp_path: Path) -> None:
    bundled = (PROFILES_DIR / "tiny-cpu.yaml").read_bytes()
    with running_vllm() as (root, _):
        cfg = FidelityConfig(
            out_dir=tmp_path,
            python=vllm_python(),
            write_profile=False,
            url=root,
            levels=(1, 4),
            requests_per_stream=2,
            prefill_lengths=(16, 256, 1024),
            decode_runs=((16, 1), (16, 4), (16, 16), (512, 1)),
            decode_output_tokens=32,
        )
        code = run_fidelity(cfg)
    assert code in (0, 1)  # 1 only says an error exceeded the target on this busy box
    result = json.loads((tmp_path / "fidelity.json").read_text())
    assert [r["concurrency"] for r in result["comparison"]] == [1, 4]
    row = result["comparison"][1]
    for key in ("ttft", "tpot", "server_ttft", "server_itl"):
        assert row[f"real_{key}_ms"] > 0 and row[f"sim_{key}_ms"] > 0
        assert row[f"{key}_error"] == pytest.approx(
            row[f"sim_{key}_ms"] / row[f"real_{key}_ms"] - 1
        )
    assert all(result["within_target"].values()) == (code == 0)
    fitted = load_profile(str(tmp_path / "tiny-cpu.fitted.yaml"))
    assert fitted.step_overhead == pytest.approx(result["fit"]["step_overhead"], rel=1e-3)
    assert fitted.kv_tokens > 100_000  # read from vLLM's cache_config_info
    assert "arbiter worker fidelity" in fitted.source
    assert all(p["engine_prefill_s"] > 0 for p in result["measurements"]["prefill"])
    assert (PROFILES_DIR / "tiny-cpu.yaml").read_bytes() == bundled  # write_profile=False
