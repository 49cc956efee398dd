"""Writes a tiny random-weight vision-language model directory that vLLM CPU serves offline.

The architecture is PaddleOCR-VL (`PaddleOCRVLForConditionalGeneration`): it counts images by
Qwen2-VL's rule (resize both sides to multiples of 28 with the area in `[min_pixels,
max_pixels]`, one token per merged 28×28 patch), and — unlike Qwen2-VL, LLaVA and most others —
vLLM's CPU build can import it: their vLLM modules import torchvision, which `.venv-vllm` does
not have (`create_env.sh` leaves it out because its PyPI build needs CUDA torch).

The directory holds `config.json` (text: hidden 128, 2 layers, 2 heads so head_dim is 64 as
vLLM's CPU attention needs; vision: one SigLIP block of width 64, patch 14, spatial merge 2),
a byte-level BPE tokenizer trained on `tiny_model`'s seeded corpus with the image tokens, a
ChatML template that writes `<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>` per image part,
and `preprocessor_config.json` with `min_pixels` `MIN_PIXELS` and `max_pixels` `MAX_PIXELS`.
No weights: serve it with `--load-format dummy`. Same seed, same files, byte for byte.

vLLM replaces each placeholder with one token per merged patch of the resized image, so the
model counts an image exactly as the registry rule `VLM_RULE` does (the two markers are its
`extra_tokens`). Runs under vLLM's interpreter (needs `tokenizers`) from the repository root:
`python -m workers.vllm.tiny_vlm --out DIR [--seed S]` (see `command`).
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from workers.vllm.launch import REPO_ROOT
from workers.vllm.tiny_model import synthetic_corpus, write_json

SERVED_NAME = "tiny-vlm"
DEFAULT_DIR = REPO_ROOT / ".models" / "tiny-vlm"

EOS = "<|im_end|>"
IMAGE_TOKEN = "<|IMAGE_PLACEHOLDER|>"
SPECIAL_TOKENS = (
    "<pad>",
    "<|im_start|>",
    EOS,
    "<|IMAGE_START|>",
    IMAGE_TOKEN,
    "<|IMAGE_END|>",
    "<|VIDEO_PLACEHOLDER|>",
)
PATCH_SIZE = 14
MERGE_SIZE = 2
MIN_PIXELS = 56 * 56
MAX_PIXELS = 400 * 28 * 28
"""At most 400 image tokens per image, so several images fit the tiny model's 2,048 tokens."""
VLM_RULE: dict[str, Any] = {
    "kind": "patch_merge",
    "patch_size": PATCH_SIZE,
    "merge_size": MERGE_SIZE,
    "min_pixels": MIN_PIXELS,
    "max_pixels": MAX_PIXELS,
    "extra_tokens": 2,
}
"""The registry's `image_tokens` rule that matches this model."""
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "{{ '<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>' }}"
    "{% elif 'text' in part %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_VOCAB_TARGET = 4096
_HIDDEN = 128
_HEADS = 2
_VISION_HIDDEN = 64
_VISION_IMAGE_SIZE = 224
"""Side of the vision tower's learned position grid (interpolated to each image's grid)."""


def train_tokenizer(seed: int) -> Any:
    """A byte-level BPE `tokenizers.Tokenizer` with the model's special tokens (no BOS)."""
    tk = importlib.import_module("tokenizers")
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    tok.post_processor = tk.processors.ByteLevel(trim_offsets=False)
    trainer = tk.trainers.BpeTrainer(
        vocab_size=_VOCAB_TARGET,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(synthetic_corpus(seed), trainer=trainer)
    return tok


def model_config(vocab_size: int, ids: dict[str, int]) -> dict[str, Any]:
    """The `config.json` of a PaddleOCRVLForConditionalGeneration (the hub's flat layout)."""
    head_dim = _HIDDEN // _HEADS
    quarter = head_dim // 8
    return {
        "architectures": ["PaddleOCRVLForConditionalGeneration"],
        "model_type": "paddleocr_vl",
        "hidden_size": _HIDDEN,
        "intermediate_size": 2 * _HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": _HEADS,
        "num_key_value_heads": _HEADS,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "mrope_section": [
                quarter,
                (head_dim // 2 - quarter) // 2,
                (head_dim // 2 - quarter) // 2,
            ],
            "rope_type": "default",
            "type": "default",
        },
        "use_bias": False,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "vocab_size": vocab_size,
        "pad_token_id": ids["<pad>"],
        "bos_token_id": ids["<|im_start|>"],
        "eos_token_id": ids[EOS],
        "image_token_id": ids[IMAGE_TOKEN],
        "vision_start_token_id": ids["<|IMAGE_START|>"],
        "vision_end_token_id": ids["<|IMAGE_END|>"],
        "video_token_id": ids["<|VIDEO_PLACEHOLDER|>"],
        "vision_config": {
            "hidden_size": _VISION_HIDDEN,
            "intermediate_size": 2 * _VISION_HIDDEN,
            "num_attention_heads": 1,
            "num_hidden_layers": 1,
            "num_channels": 3,
            "image_size": _VISION_IMAGE_SIZE,
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": 1,
            "hidden_act": "gelu_pytorch_tanh",
            "layer_norm_eps": 1e-6,
        },
    }


def preprocessor_config() -> dict[str, Any]:
    """The image processor's settings (SigLIP's mean and std, our pixel bounds)."""
    return {
        "image_processor_type": "PaddleOCRVLImageProcessor",
        "processor_class": "PaddleOCRVLProcessor",
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "rescale_factor": 1 / 255,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS,
        "patch_size": PATCH_SIZE,
        "temporal_patch_size": 1,
        "merge_size": MERGE_SIZE,
    }


def write_tiny_vlm(out: Path, seed: int = 0) -> Path:
    """Write the model directory to `out` (created if needed) and return it."""
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(seed)
    ids = {t: int(tok.token_to_id(t)) for t in SPECIAL_TOKENS}
    tok.save(str(out / "tokenizer.json"))
    write_json(out / "config.json", model_config(int(tok.get_vocab_size()), ids))
    write_json(out / "tokenizer_config.json", _tokenizer_config())
    write_json(out / "preprocessor_config.json", preprocessor_config())
    write_json(out / "chat_template.json", {"chat_template": CHAT_TEMPLATE})
    write_json(
        out / "generation_config.json",
        {"eos_token_id": ids[EOS], "do_sample": True},
    )
    return out


def command(python: str, out: Path, seed: int = 0) -> list[str]:
    """The argv that writes the model with `python`; run it with `cwd=REPO_ROOT`."""
    return [python, "-m", "workers.vllm.tiny_vlm", "--out", str(out), "--seed", str(seed)]


def _tokenizer_config() -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": EOS,
        "pad_token": "<pad>",
        "extra_special_tokens": {"image_token": IMAGE_TOKEN},
        "unk_token": None,
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def main(argv: list[str] | None = None) -> None:
    """Script entry point (run under vLLM's interpreter)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(write_tiny_vlm(args.out, args.seed))


if __name__ == "__main__":
    main()
