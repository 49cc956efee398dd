"""Writes a tiny random-weight Llama model directory that vLLM can serve without any download.

The directory holds `config.json` (LlamaForCausalLM, head_dim 64 because vLLM's CPU attention
rejects 16), a byte-level BPE tokenizer trained on the spot on a seeded synthetic corpus
(`tokenizer.json` + `tokenizer_config.json` with a ChatML-style Jinja chat template),
`generation_config.json`, and — unless `weights=False` — random float32 weights in
`model.safetensors`. Serve it with `--load-format dummy` (vLLM draws its own random weights)
or without it (vLLM loads the written ones). Same seed, same files, byte for byte.

This module runs under vLLM's interpreter (it needs `tokenizers`, plus `numpy` and
`safetensors` for weights); those imports are local, so importing it costs nothing. Run it as a
script: `python workers/vllm/tiny_model.py --out DIR [--seed S] [--no-weights]`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BOS = "<s>"
EOS = "<|im_end|>"
SPECIAL_TOKENS = (BOS, "</s>", "<|im_start|>", EOS, "<pad>")
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_WORD_TEXT = (
    "the of and to in is it that for you was with on as have be at not this but by from they "
    "we say her she or an will my one all would there their what so up out if about who get "
    "which go me when make can like time no just him know take people into year your good some "
    "could them see other than then now look only come its over think also back after use two "
    "how our work first well way even new want because any these give day most us model token "
    "request tenant agent worker queue latency prefill decode batch cache stream fair share"
)
_WORDS = tuple(_WORD_TEXT.split())
_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
_CODAS = ("", "", "n", "r", "s", "t", "l", "nd", "ng")


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the tiny model. head_dim = hidden_size / num_attention_heads must be 64."""

    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    max_position_embeddings: int = 2048
    vocab_target: int = 4096
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def synthetic_corpus(seed: int, lines: int = 4000) -> list[str]:
    """Seeded English-like text: common words mixed with pseudo-words, numbers and punctuation."""
    rng = random.Random(seed)
    pseudo = [_pseudo_word(rng) for _ in range(3000)]
    corpus = []
    for _ in range(lines):
        words = [
            rng.choice(_WORDS) if rng.random() < 0.6 else rng.choice(pseudo)
            for _ in range(rng.randint(4, 16))
        ]
        if rng.random() < 0.2:
            words.append(str(rng.randint(0, 9999)))
        line = " ".join(words).capitalize() + rng.choice((".", ".", "?", "!", ",", ":"))
        corpus.append(line)
    return corpus


def _pseudo_word(rng: random.Random) -> str:
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(1, 3))]
    return "".join(parts) + rng.choice(_CODAS)


def train_tokenizer(spec: TinyModelSpec) -> Any:
    """Train a byte-level BPE tokenizer (`tokenizers.Tokenizer`) that prepends BOS like Llama."""
    tk = importlib.import_module("tokenizers")
    decoders, models, pre_tokenizers, processors, trainers = (
        tk.decoders,
        tk.models,
        tk.pre_tokenizers,
        tk.processors,
        tk.trainers,
    )
    tok = tk.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_target,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(synthetic_corpus(spec.seed), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
            ),
        ]
    )
    return tok


def model_config(spec: TinyModelSpec, vocab_size: int, bos_id: int, eos_id: int) -> dict[str, Any]:
    """The `config.json` of a LlamaForCausalLM with tied embeddings."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_attention_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_position_embeddings,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "initializer_range": 0.02,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "vocab_size": vocab_size,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": None,
        "torch_dtype": "float32",
    }


def write_weights(path: Path, spec: TinyModelSpec, vocab_size: int) -> None:
    """Random normal(0, 0.02) float32 weights under Hugging Face Llama names; norms are ones."""
    import numpy as np

    save_file = importlib.import_module("safetensors.numpy").save_file

    rng = np.random.default_rng(spec.seed)
    h, inter = spec.hidden_size, spec.intermediate_size

    def normal(*shape: int) -> Any:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    tensors: dict[str, Any] = {"model.embed_tokens.weight": normal(vocab_size, h)}
    for i in range(spec.num_hidden_layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"{p}self_attn.{name}.weight"] = normal(h, h)
        tensors[f"{p}mlp.gate_proj.weight"] = normal(inter, h)
        tensors[f"{p}mlp.up_proj.weight"] = normal(inter, h)
        tensors[f"{p}mlp.down_proj.weight"] = normal(h, inter)
        tensors[f"{p}input_layernorm.weight"] = np.ones(h, dtype=np.float32)
        tensors[f"{p}post_attention_layernorm.weight"] = np.ones(h, dtype=np.float32)
    tensors["model.norm.weight"] = np.ones(h, dtype=np.float32)
    save_file(tensors, str(path), metadata={"format": "pt"})


def write_tiny_model(
    out: Path, spec: TinyModelSpec = TinyModelSpec(), weights: bool = True
) -> Path:
    """Write the whole model directory to `out` (created if needed) and return it."""
    if spec.head_dim != 64:
        raise ValueError(f"head_dim must be 64 for vLLM's CPU attention, got {spec.head_dim}")
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(spec)
    vocab_size = int(tok.get_vocab_size())
    bos_id, eos_id = int(tok.token_to_id(BOS)), int(tok.token_to_id(EOS))
    tok.save(str(out / "tokenizer.json"))
    write_json(out / "config.json", model_config(spec, vocab_size, bos_id, eos_id))
    write_json(out / "tokenizer_config.json", _tokenizer_config(spec))
    write_json(
        out / "generation_config.json",
        {"bos_token_id": bos_id, "eos_token_id": eos_id, "do_sample": True},
    )
    if weights:
        write_weights(out / "model.safetensors", spec, vocab_size)
    return out


def _tokenizer_config(spec: TinyModelSpec) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": "<pad>",
        "unk_token": None,
        "model_max_length": spec.max_position_embeddings,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def write_json(path: Path, data: dict[str, Any]) -> None:
    """`data` as sorted, indented JSON (the same input writes the same bytes)."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> None:
    """Script entry point (run under vLLM's interpreter)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-weights", action="store_true", help="for --load-format dummy only")
    args = parser.parse_args(argv)
    out = write_tiny_model(args.out, TinyModelSpec(seed=args.seed), weights=not args.no_weights)
    print(out)


if __name__ == "__main__":
    main()
