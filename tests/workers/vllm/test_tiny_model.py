"""The tiny model directory is valid for transformers and vLLM, and deterministic."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.vllm_server import vllm_python
from workers.vllm import launch

REPO = Path(__file__).resolve().parents[3]

INSPECT = r"""
import json, sys
from safetensors.numpy import load_file
from transformers import AutoConfig, AutoTokenizer
d = sys.argv[1]
cfg = AutoConfig.from_pretrained(d)
tok = AutoTokenizer.from_pretrained(d)
text = "Fair shares for every tenant: 42 agents, über-latency & naïve queues!"
ids = tok(text)["input_ids"]
chat = tok.apply_chat_template(
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    tokenize=False, add_generation_prompt=True)
weights = {k: list(v.shape) for k, v in load_file(d + "/model.safetensors").items()}
print(json.dumps({
    "class": type(cfg).__name__, "head_dim": cfg.head_dim, "vocab": cfg.vocab_size,
    "tok_vocab": len(tok), "bos": tok.bos_token_id, "eos": tok.eos_token_id,
    "cfg_bos": cfg.bos_token_id, "cfg_eos": cfg.eos_token_id, "ids": ids,
    "decoded": tok.decode(ids, skip_special_tokens=True), "text": text, "chat": chat,
    "weights": weights, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
}))
"""


@pytest.fixture(scope="module")
def python() -> str:
    return vllm_python()


def write(python: str, out: Path, *args: str) -> Path:
    cmd = [sys.executable, "-m", "workers.vllm", "tiny-model", "--out", str(out)]
    subprocess.run([*cmd, "--python", python, *args], cwd=REPO, check=True)
    return out


@pytest.fixture(scope="module")
def model(python: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(python, tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def inspected(python: str, model: Path) -> dict[str, Any]:
    out = subprocess.run(
        [python, "-c", INSPECT, str(model)], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_config_is_a_llama_with_head_dim_64(inspected: dict[str, Any]) -> None:
    assert inspected["class"] == "LlamaConfig"
    assert inspected["head_dim"] == 64
    assert (inspected["layers"], inspected["hidden"]) == (2, 256)
    assert 2000 <= inspected["vocab"] <= 4096
    assert inspected["vocab"] == inspected["tok_vocab"]
    assert (inspected["cfg_bos"], inspected["cfg_eos"]) == (inspected["bos"], inspected["eos"])


def test_tokenizer_round_trips_and_prepends_bos(inspected: dict[str, Any]) -> None:
    assert inspected["decoded"] == inspected["text"]
    assert inspected["ids"][0] == inspected["bos"]
    assert len(inspected["ids"]) < len(inspected["text"].encode())  # BPE merges happened


def test_chat_template_renders(inspected: dict[str, Any]) -> None:
    assert inspected["chat"] == (
        "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_weights_match_the_config(inspected: dict[str, Any]) -> None:
    weights = inspected["weights"]
    assert weights["model.embed_tokens.weight"] == [inspected["vocab"], 256]
    assert weights["model.layers.1.mlp.down_proj.weight"] == [256, 512]
    assert "lm_head.weight" not in weights  # tied embeddings


def test_same_seed_same_bytes_other_seed_other_model(
    python: str, model: Path, tmp_path: Path
) -> None:
    again = write(python, tmp_path / "again")
    other = write(python, tmp_path / "other", "--seed", "1", "--no-weights")
    names = sorted(p.name for p in model.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    assert all((model / n).read_bytes() == (again / n).read_bytes() for n in names)
    assert not (other / "model.safetensors").exists()
    assert (other / "tokenizer.json").read_bytes() != (model / "tokenizer.json").read_bytes()


def test_shared_model_dir_is_reused(python: str) -> None:
    from tests.support.vllm_server import tiny_model_dir

    first = tiny_model_dir(python)
    mtime = (first / "config.json").stat().st_mtime_ns
    assert tiny_model_dir(python) == first == launch.DEFAULT_TINY_MODEL_DIR
    assert (first / "config.json").stat().st_mtime_ns == mtime
