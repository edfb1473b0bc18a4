# SPDX-License-Identifier: Apache-2.0
"""Checkpoints for the benchmark, made once.

- build/models/splade-base-random: a BERT-base-shaped BertForMaskedLM with
  seeded random weights and splade-tiny's tokenizer (cost depends on shape,
  not weights).
- build/models/<name>-backbone: the BertModel part of a checkpoint, for
  vLLM's dense embedding of the same backbone (the floor; vLLM does not
  load a BertForMaskedLM folder as BertModel: the `bert.` prefix is not
  stripped).
- build/bench/upstream-<name>: a copy of a checkpoint that upstream's
  unpatched SPLADE (vLLM 0.32.0) can load: upstream neither ties the
  decoder to the word embeddings nor maps `cls.predictions.bias`, and does
  not rename legacy LayerNorm `gamma`/`beta` in the head, so a masked-LM
  folder as transformers 5 saves it (splade-tiny, splade-base-random) fails
  with "weights not initialized". The copy has the same numbers: decoder
  weight = word embeddings, decoder bias = `cls.predictions.bias`, every
  `gamma`/`beta` renamed to `weight`/`bias` (as transformers does on load).
"""
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "build/models"
BENCH = ROOT / "build/bench"
TINY = MODELS / "splade-tiny"
BASE = MODELS / "splade-base-random"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
SPLADE = {"architectures": ["BertSpladeSparseEmbeddingModel"]}
DENSE = {"architectures": ["BertModel"]}


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
    shutil.rmtree(tmp, ignore_errors=True)
    BertForMaskedLM(config).save_pretrained(tmp)
    _copy_tokenizer(TINY, tmp)
    tmp.rename(BASE)
    return BASE


DISTILL = MODELS / "splade-distill-shaped-random"


def ensure_distill_shaped() -> Path:
    """A DistilBertForMaskedLM of the shape of OpenSearch's
    neural-sparse-encoding-doc-v3-distill (6 layers, hidden 768, BERT's
    30,522-token vocabulary), with seeded random weights and splade-tiny's
    tokenizer: cost depends on shape, not weights."""
    if (DISTILL / "model.safetensors").is_file():
        return DISTILL
    import torch
    from transformers import (DistilBertConfig, DistilBertForMaskedLM,
                              DistilBertTokenizerFast)
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=30522, dim=768, n_layers=6,
                              n_heads=12, hidden_dim=3072)
    tmp = DISTILL.with_name(DISTILL.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    DistilBertForMaskedLM(config).save_pretrained(tmp)
    DistilBertTokenizerFast(tokenizer_file=str(TINY /
                                               "tokenizer.json")).save_pretrained(tmp)
    tmp.rename(DISTILL)
    return DISTILL


def ensure_backbone(path: Path) -> Path:
    """A BertModel copy of a BertForMaskedLM checkpoint's encoder."""
    out = path.with_name(path.name + "-backbone")
    if (out / "model.safetensors").is_file():
        return out
    from transformers import BertForMaskedLM
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    BertForMaskedLM.from_pretrained(path).bert.save_pretrained(tmp)
    _copy_tokenizer(path, tmp)
    tmp.rename(out)
    return out


def upstream_tensors(tensors: dict) -> dict:
    """A BertForMaskedLM state dict with the names and tensors upstream's
    BertSpladeSparseEmbeddingModel loads (see the module docstring)."""
    out = {}
    for name, tensor in tensors.items():
        if name.endswith(".gamma"):
            name = name[:-len("gamma")] + "weight"
        elif name.endswith(".beta"):
            name = name[:-len("beta")] + "bias"
        out[name] = tensor.contiguous()
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in out else ""
    if "cls.predictions.decoder.weight" not in out:
        out["cls.predictions.decoder.weight"] = (
            out[prefix + "embeddings.word_embeddings.weight"].clone())
    if "cls.predictions.decoder.bias" not in out:
        out["cls.predictions.decoder.bias"] = (
            out["cls.predictions.bias"].clone())
    return out


def ensure_upstream(path: Path) -> Path:
    """The copy of `path` that upstream vLLM 0.32.0's SPLADE can load."""
    out = BENCH / f"upstream-{path.name}"
    src = path / "model.safetensors"
    dst = out / "model.safetensors"
    if dst.is_file() and dst.stat().st_mtime >= src.stat().st_mtime:
        return out
    from safetensors.torch import load_file, save_file
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(upstream_tensors(load_file(src)), tmp / "model.safetensors",
              metadata={"format": "pt"})
    shutil.copy(path / "config.json", tmp / "config.json")  # unchanged
    _copy_tokenizer(path, tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


if __name__ == "__main__":
    for model in (TINY, ensure_base()):
        print(ensure_backbone(model), file=sys.stderr)
        print(ensure_upstream(model), file=sys.stderr)
