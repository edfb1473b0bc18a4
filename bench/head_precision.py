# SPDX-License-Identifier: Apache-2.0
"""The masked-LM head's precision in a bf16 model, four ways, per family:
which one SPLADE's head takes by default (issue 44; patch 1).

With the encoder in bf16 (as a bf16 or fp16 vLLM engine runs it), the head
(transform and vocabulary-wide decoder) is run:
- "bf16 head, bf16 logits": the whole head in bf16, logits rounded to bf16,
  activation and max in bf16 (the series' earlier rule; what
  sentence-transformers' own bf16 model does);
- "bf16 operands, fp32 logits": the transform in bf16, the decoder's GEMM
  on bf16 operands accumulated and written in fp32 (upstream's idiom,
  `torch.mm(..., out_dtype=torch.float32)`, CUDA only in torch 2.14; here
  computed exactly by widening the bf16 operands, whose products fp32
  holds exactly), activation and max in fp32: the series' default on CUDA;
- "bf16 logits widened": the decoder's bf16 GEMM output rounded to bf16,
  then bias, activation and max in fp32: the series' default on CPU, where
  torch has no out_dtype kernel;
- "fp32 head": transform and decoder in fp32 on the bf16 encoder's output
  (`--hf-overrides '{"head_dtype": "float32"}'`).
Each against transformers' fp32 model, max-pooled as SpladePooling does
(checked against sentence-transformers' fp32 SparseEncoder): largest and
mean error, terms that appear or vanish, what retrieval sees (bench/
head_dtype.py's `compare`). The pooler's CPU time for a bf16 and an fp32
head on 2,048 tokens (4 x 512) of each family's shape: `pool_vocab_blocks`
as vLLM runs it on CPU.

    python -m bench.head_precision OUT.json [--corpus N]
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

from bench.e2e import st_vectors
from bench.head_dtype import compare, fitting, folders, texts

HEAD_MODULES = ("cls", "lm_head", "vocab_transform", "vocab_layer_norm",
                "vocab_projector", "head", "decoder")


def head_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [getattr(model, n) for n in HEAD_MODULES
            if isinstance(getattr(model, n, None), torch.nn.Module)]


def masked_max(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SpladePooling's max over a batch's tokens, in logits' dtype."""
    act = torch.log1p(torch.relu(logits))
    return (act * mask[..., None].to(act.dtype)).amax(1)


@torch.inference_mode()
def vectors(folder: Path, batch: list[str]) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    fp32 = AutoModelForMaskedLM.from_pretrained(str(folder)).eval()
    bf16 = AutoModelForMaskedLM.from_pretrained(
        str(folder), torch_dtype=torch.bfloat16).eval()
    # The fp32 head: the checkpoint's fp32 head weights (the decoder untied
    # from the embeddings) on the bf16 body.
    mixed = AutoModelForMaskedLM.from_pretrained(str(folder)).eval()
    tied = mixed.get_output_embeddings()
    tied.weight = torch.nn.Parameter(tied.weight.detach().clone())
    heads = head_modules(mixed)
    mixed.to(torch.bfloat16)
    for module in heads:
        module.float().register_forward_pre_hook(lambda _, args: tuple(
            a.float() if torch.is_floating_point(a) else a for a in args))
    decoder = bf16.get_output_embeddings()
    w, b = decoder.weight, decoder.bias
    seen = {}
    decoder.register_forward_hook(
        lambda _, args, out: seen.update(x=args[0]))
    out: dict[str, list[torch.Tensor]] = {}
    for first in range(0, len(batch), 16):
        enc = tokenizer(batch[first:first + 16], padding=True,
                        return_tensors="pt")
        mask = enc["attention_mask"]
        runs = {"fp32": fp32(**enc).logits,
                "bf16 head, bf16 logits": bf16(**enc).logits}
        x = seen["x"]
        runs["bf16 operands, fp32 logits"] = (x.float() @ w.float().t() +
                                              b.float())
        runs["bf16 logits widened"] = (x @ w.t()).float() + b.float()
        runs["fp32 head"] = mixed(**enc).logits
        for name, logits in runs.items():
            out.setdefault(name, []).append(masked_max(logits, mask).float())
    return {k: torch.cat(v) for k, v in out.items()}


@torch.inference_mode()
def pooler_seconds(folder: Path) -> dict[str, float]:
    """pool_vocab_blocks on CPU, a bf16 and an fp32 head, 4 x 512 tokens."""
    from transformers import AutoConfig

    from vllm.model_executor.models.splade_pooling import (block_columns,
                                                            pool_vocab_blocks)
    config = AutoConfig.from_pretrained(str(folder))
    gen = torch.Generator().manual_seed(0)
    lens = torch.full((4, ), 512)
    x = torch.randn(2048, config.hidden_size, generator=gen)
    w = torch.randn(config.vocab_size, config.hidden_size, generator=gen) * .1
    b = torch.zeros(config.vocab_size)
    cols = block_columns(2048, config.vocab_size, x.device)
    times = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        args = [t.to(dtype) for t in (x, w, b)]
        pool_vocab_blocks(*args, lens, None, "max", "relu", cols)
        start = time.perf_counter()
        for _ in range(3):
            pool_vocab_blocks(*args, lens, None, "max", "relu", cols)
        times[name] = (time.perf_counter() - start) / 3
    return times


def main(out_path: str, num_corpus: int) -> None:
    all_texts = texts(num_corpus)
    rows = []
    for family, (folder, _) in folders().items():
        print(f"bench: head precision, {family}", file=sys.stderr, flush=True)
        batch = fitting(folder, all_texts)
        runs = vectors(folder, batch)
        ref = runs.pop("fp32")
        st = st_vectors(folder, batch, torch.float32)
        assert torch.allclose(ref, st, atol=1e-4), "reference != sentence-transformers"
        seconds = pooler_seconds(folder)
        for name, vecs in runs.items():
            cpu = seconds["fp32" if name == "fp32 head" else "bf16"]
            rows.append(dict(family=family, head=name, texts=len(batch),
                             pooler_cpu_s=cpu, **compare(vecs, ref)))
            r = rows[-1]
            print(f"  {name:28} max {r['max_abs']:.4f} mean {r['mean_abs']:.5f}"
                  f" appear {r['appear']} vanish {r['vanish']} of "
                  f"{r['ref_terms']}  top10 {r['top10_overlap']:.3f}  "
                  f"pooler {cpu * 1e3:.0f} ms", file=sys.stderr, flush=True)
    Path(out_path).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--corpus", type=int, default=200)
    args = parser.parse_args()
    main(args.out, args.corpus)
