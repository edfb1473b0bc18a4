# SPDX-License-Identifier: Apache-2.0
"""End to end: texts/s of vLLM SPLADE vs sentence-transformers, and the floor.

For one checkpoint, on the same texts, side by side in one process:
vLLM `LLM.embed` with BertSpladeSparseEmbeddingModel, sentence-transformers
`SparseEncoder.encode(batch_size=32)`, vLLM's dense BertModel embedding of
the same backbone, and the bare decoder GEMM on the same number of tokens.
Engine and model start are excluded; each side gets one warm-up call.
Each figure is wall time, with the process CPU time beside it (steadier
when other jobs share the cores); the wall time spent in the BERT encoder
and in the SPLADE pooler is recorded too (wrapped `forward`s).
With --rounds N the four run N times, interleaved, and the best is kept.

    python -m bench.e2e {tiny|base} OUT.json [--texts N] [--rounds N]
"""
import argparse
import gc
import json
import resource
import time
from functools import partial, wraps
from pathlib import Path

import torch
from transformers import AutoConfig, AutoTokenizer

from bench.corpus import count_tokens, make_corpus, subset
from bench.models import TINY, ensure_backbone, ensure_base

SPLADE = {"architectures": ["BertSpladeSparseEmbeddingModel"]}
DENSE = {"architectures": ["BertModel"]}

SPENT: dict[str, float] = {}


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _timed(cls: type, key: str) -> None:
    """Add the wall time of each `cls.forward` call to SPENT[key], and the
    page faults it takes (fresh memory) to SPENT[key + "_faults"]."""
    forward = cls.forward

    @wraps(forward)
    def timed_forward(self, *args, **kwargs):
        start, faults = time.perf_counter(), _faults()
        try:
            return forward(self, *args, **kwargs)
        finally:
            seconds = time.perf_counter() - start
            SPENT[key + "_s"] = SPENT.get(key + "_s", 0.0) + seconds
            SPENT[key + "_faults"] = (SPENT.get(key + "_faults", 0) +
                                      _faults() - faults)

    cls.forward = timed_forward


def vllm_seconds(path: Path, overrides: dict, texts: list[str],
                 name: str) -> dict[str, float]:
    """Wall time of one `LLM.embed` over `texts`, engine start excluded,
    and of it the time in the BERT encoder and in the SPLADE pooler."""
    from vllm import LLM
    from vllm.distributed import cleanup_dist_env_and_memory
    llm = LLM(model=str(path),
              runner="pooling",
              dtype="float32",
              enforce_eager=True,
              hf_overrides=overrides)
    llm.embed(texts[:16], use_tqdm=False)
    SPENT.clear()
    start, cpu = time.perf_counter(), time.process_time()
    out = llm.embed(texts, use_tqdm=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(out) == len(texts)
    del llm, out
    gc.collect()
    cleanup_dist_env_and_memory()
    spent = {f"{name}_{key}": v for key, v in SPENT.items()}
    return spent | {name + "_s": seconds, name + "_cpu_s": cpu}


def st_seconds(path: Path, texts: list[str]) -> dict[str, float]:
    """Wall time of sentence-transformers' SparseEncoder over `texts`."""
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(str(path), device="cpu")
    encoder.encode(texts[:32], batch_size=32)
    start, cpu = time.perf_counter(), time.process_time()
    out = encoder.encode(texts, batch_size=32)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(out) == len(texts)
    return {"st_s": seconds, "st_cpu_s": cpu}


@torch.inference_mode()
def gemm_seconds(hidden: int,
                 vocab: int,
                 num_tokens: int,
                 chunk: int = 512) -> dict[str, float]:
    """The bare decoder GEMM, [T, H] x [H, V] + bias, `chunk` rows a time."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(vocab, hidden, generator=gen) * 0.02
    bias = torch.zeros(vocab)
    x = torch.randn(chunk, hidden, generator=gen)
    buf = torch.empty(chunk, vocab)
    torch.addmm(bias, x, weight.t(), out=buf)  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for first in range(0, num_tokens, chunk):
        n = min(chunk, num_tokens - first)
        torch.addmm(bias, x[:n], weight.t(), out=buf[:n])
    return {
        "gemm_s": time.perf_counter() - start,
        "gemm_cpu_s": time.process_time() - cpu
    }


def main(which: str, out_path: str, num_texts: int, rounds: int) -> None:
    path = TINY if which == "tiny" else ensure_base()
    backbone = ensure_backbone(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    corpus = make_corpus(tokenizer)
    texts = subset(corpus, num_texts)
    lens = count_tokens(tokenizer, texts)
    config = AutoConfig.from_pretrained(path)
    result = {
        "model": path.name,
        "layers": config.num_hidden_layers,
        "hidden": config.hidden_size,
        "texts": len(texts),
        "corpus": len(corpus),
        "rounds": rounds,
        "tokens": sum(lens),
        "min_len": min(lens),
        "max_len": max(lens),
    }
    from vllm.model_executor.models.bert import BertModel, SpladeSparsePooler
    _timed(BertModel, "encoder")
    _timed(SpladeSparsePooler, "pooler")
    gemm = partial(gemm_seconds, config.hidden_size, config.vocab_size,
                   sum(lens))
    runs = {
        "vllm_s": partial(vllm_seconds, path, SPLADE, texts, "vllm"),
        "dense_s": partial(vllm_seconds, backbone, DENSE, texts, "dense"),
        "gemm_s": gemm,
        "st_s": partial(st_seconds, path, texts),
    }
    for _ in range(rounds):  # interleaved; the best of each is kept
        for key, run in runs.items():
            figures = run()
            if figures[key] < result.get(key, float("inf")):
                result.update(figures)
            cpu = figures[key.replace("_s", "_cpu_s")]
            print(f"bench: {path.name} {key[:-2]} {figures[key]:.2f} s "
                  f"(CPU {cpu:.2f} s)", flush=True)
    Path(out_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", choices=("tiny", "base"))
    parser.add_argument("out")
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    main(args.model, args.out, args.texts, args.rounds)
