# SPDX-License-Identifier: Apache-2.0
"""Checkpoints for the benchmark, made once under build/models.

- splade-base-random: a BERT-base-shaped BertForMaskedLM with seeded random
  weights and splade-tiny's tokenizer (cost depends on shape, not weights).
- <name>-backbone: the BertModel part of a checkpoint, for vLLM's dense
  embedding of the same backbone (vLLM cannot load a BertForMaskedLM
  folder as BertModel: the `bert.` prefix is not stripped).
"""
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "build/models"
TINY = MODELS / "splade-tiny"
BASE = MODELS / "splade-base-random"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def _copy_tokenizer(src: Path, dst: Path) -> None:
    for name in TOKENIZER_FILES:
        shutil.copy(src / name, dst / name)


def ensure_base() -> Path:
    """The BERT-base-shaped random SPLADE checkpoint."""
    if (BASE / "model.safetensors").is_file():
        return BASE
    import torch
    from transformers import BertConfig, BertForMaskedLM
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522,
                        hidden_size=768,
                        num_hidden_layers=12,
                        num_attention_heads=12,
                        intermediate_size=3072,
                        max_position_embeddings=512)
    tmp = BASE.with_name(BASE.name + ".tmp")
    BertForMaskedLM(config).save_pretrained(tmp)
    _copy_tokenizer(TINY, tmp)
    tmp.rename(BASE)
    return BASE


def ensure_backbone(path: Path) -> Path:
    """A BertModel copy of a BertForMaskedLM checkpoint's encoder."""
    out = path.with_name(path.name + "-backbone")
    if (out / "model.safetensors").is_file():
        return out
    from transformers import BertForMaskedLM
    tmp = out.with_name(out.name + ".tmp")
    BertForMaskedLM.from_pretrained(path).bert.save_pretrained(tmp)
    _copy_tokenizer(path, tmp)
    tmp.rename(out)
    return out


if __name__ == "__main__":
    for model in (TINY, ensure_base()):
        print(ensure_backbone(model), file=sys.stderr)
