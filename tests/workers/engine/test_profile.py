"""Latency profiles: every bundled file validates, and the fits reproduce their calibration."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest
import yaml

from workers.engine.profile import (
    PROFILES_DIR,
    LatencyModel,
    OutputLenDist,
    list_profiles,
    load_profile,
)
from workers.engine.step import EngineConfig

REQUIRED = {
    "llama3-8b-a100",
    "llama3-8b-h100",
    "qwen2.5-32b-a100",
    "tiny-cpu",
    "qwen2-vl-7b-a100",
    "sd-image-a100",
}
MS = 1e-3


def test_required_profiles_are_bundled() -> None:
    assert set(list_profiles()) >= REQUIRED


@pytest.mark.parametrize("name", list_profiles())
def test_every_profile_loads_validates_and_cites_a_source(name: str) -> None:
    p = load_profile(name)
    assert p.name == name
    assert len(p.source) > 40
    assert p.model.num_layers > 0 and p.model.hidden_size > 0
    cfg = EngineConfig.from_profile(p)
    assert cfg.kv_tokens == p.kv_tokens and cfg.max_num_seqs == p.max_num_seqs
    # a request as long as the model allows always fits the KV cache
    assert p.kv_tokens >= p.model.max_model_len
    m = LatencyModel(p)
    assert m.step_time(0, 2, 100) > m.step_time(0, 1, 100) > 0
    if p.model.kind != "image":  # a diffusion step does not attend a growing KV cache
        assert m.step_time(0, 8, 8000) > m.step_time(0, 8, 800)
    assert m.step_time(512, 0, 0) > m.step_time(16, 0, 0) > 0
    assert m.step_time(0, 0, 0) == 0.0


def test_model_sizes_are_the_published_configs() -> None:
    sizes = {n: load_profile(n).model for n in REQUIRED}
    assert (sizes["llama3-8b-a100"].hidden_size, sizes["llama3-8b-a100"].num_layers) == (4096, 32)
    assert (sizes["qwen2.5-32b-a100"].hidden_size, sizes["qwen2.5-32b-a100"].num_layers) == (
        5120,
        64,
    )
    assert sizes["qwen2-vl-7b-a100"].kind == "vlm"
    assert (sizes["qwen2-vl-7b-a100"].hidden_size, sizes["qwen2-vl-7b-a100"].num_layers) == (
        3584,
        28,
    )
    assert sizes["sd-image-a100"].kind == "image"
    assert "denoising" in sizes["sd-image-a100"].units
    assert (sizes["tiny-cpu"].hidden_size, sizes["tiny-cpu"].num_layers) == (256, 2)


def test_llama3_8b_a100_reproduces_its_calibration_points() -> None:
    m = LatencyModel(load_profile("llama3-8b-a100"))
    assert m.step_time(0, 1, 0) == pytest.approx(9.7 * MS, rel=1e-3)
    assert m.step_time(0, 64, 0) == pytest.approx(11.2 * MS, rel=1e-3)
    assert m.step_time(2048, 0, 0) == pytest.approx(142 * MS, rel=1e-3)


def test_llama3_8b_h100_reproduces_its_calibration_points() -> None:
    m = LatencyModel(load_profile("llama3-8b-h100"))
    for n in (128, 1000, 4000):
        assert m.step_time(n, 0, 0) == pytest.approx((30 + 0.0406 * n) * MS, rel=1e-3)
    assert m.step_time(0, 1, 0) == pytest.approx(12 * MS, rel=1e-3)
    a100 = LatencyModel(load_profile("llama3-8b-a100"))
    prefill = [x.step_time(4096, 0, 0) - x.step_time(2048, 0, 0) for x in (m, a100)]
    assert prefill[0] < prefill[1]  # an H100 prefills faster than an A100


def test_tiny_cpu_is_fitted_and_plausible() -> None:
    """`tiny-cpu` is fitted to the real vLLM CPU server by `arbiter worker fidelity`: a decode
    step of a few ms at batch 1 (2.4 ms when fitted on this project's 2-core machine)."""
    p = load_profile("tiny-cpu")
    m = LatencyModel(p)
    assert 1 * MS <= m.step_time(0, 1, 64) <= 10 * MS
    assert m.step_time(0, 32, 32 * 64) > 1.5 * m.step_time(0, 1, 64)
    assert "arbiter worker fidelity" in p.source


def test_speed_divides_step_time() -> None:
    p = load_profile("llama3-8b-a100")
    assert LatencyModel(p, speed=10).step_time(100, 4, 400) == pytest.approx(
        LatencyModel(p).step_time(100, 4, 400) / 10
    )
    with pytest.raises(ValueError):
        LatencyModel(p, speed=0)


def test_load_by_path_and_refuse_unknown_or_extra_fields(tmp_path: Path) -> None:
    data = yaml.safe_load((PROFILES_DIR / "tiny-cpu.yaml").read_text())
    good = tmp_path / "mine.yaml"
    good.write_text(yaml.safe_dump(data))
    assert load_profile(str(good)).name == "tiny-cpu"
    data["step_overhed"] = 0.1
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="step_overhed: Extra inputs are not permitted"):
        load_profile(str(bad))
    with pytest.raises(ValueError, match="unknown latency profile"):
        load_profile("no-such-profile")


def test_output_length_distribution_mean_and_clipping() -> None:
    dist = OutputLenDist(mean=200, sigma=0.8)
    rng = random.Random(7)
    draws = [dist.sample(rng, 100_000) for _ in range(20_000)]
    assert statistics.fmean(draws) == pytest.approx(200, rel=0.05)
    assert min(draws) >= 1
    clipped = [dist.sample(rng, 50) for _ in range(2000)]
    assert max(clipped) == 50
    assert OutputLenDist(mean=28).sample(rng, 1000) == 28
    assert OutputLenDist(mean=28, min_tokens=40).sample(rng, 30) == 30


def test_engine_config_overrides_and_validation() -> None:
    p = load_profile("llama3-8b-a100")
    cfg = EngineConfig.from_profile(p, kv_tokens=4096, scheduling="priority")
    assert (cfg.kv_tokens, cfg.scheduling, cfg.num_blocks) == (4096, "priority", 256)
    with pytest.raises(ValueError):
        EngineConfig(kv_tokens=8, block_size=16)
    with pytest.raises(ValueError):
        EngineConfig(max_num_seqs=0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\n  a: [\n", "not valid YAML (line 2, column 4)"),
        ("name: x\nfoo: 1\n", "description: Field required (and "),
    ],
)
def test_a_bad_profile_file_is_one_line_naming_it(tmp_path: Path, text: str, expected: str) -> None:
    """Regression: malformed YAML escaped as a ParserError (not a ValueError: a traceback on
    every command taking --profile), and a wrong file as a dozen-line validation dump."""
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        load_profile(str(path))
    message = str(caught.value)
    assert message.startswith(f"latency profile {path}: ") and expected in message
    assert "\n" not in message
