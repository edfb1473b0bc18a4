# SPDX-License-Identifier: Apache-2.0
"""The model families beyond BERT: DistilBERT SPLADE against
sentence-transformers, and BGE-M3's dense + sparse cost against dense
alone, side by side in one run on the bench corpus.

- DistilBERT: splade-tiny in DistilBERT's layout (tests/checkpoints.py:
  the trained weights, token type 0 folded into the positions), `LLM.embed`
  of the patched build (DistilBertSpladeSparseEmbeddingModel) vs
  `SparseEncoder.encode(batch_size=32)`; the first 16 vectors are checked
  against sentence-transformers (1e-5) before timing.
- BGE-M3: a seeded random XLM-R shaped like bge-m3-small would be (6
  layers, hidden 384, BGE-M3's 250,002-token vocabulary; a unigram
  tokenizer of 8,000 pieces trained on the corpus, since cost does not
  depend on which pieces) with sparse_linear.pt and colbert_linear.pt. One
  engine per pooling task, as vLLM serves them: `embed` (dense alone),
  `token_classify` (the lexical weights, reduced by token id as
  /embed_sparse does, reduction timed apart) and `embed&token_classify`
  (dense and lexical in one forward pass, what the BGE-M3 IO processor
  plugin runs).
Each vLLM run is a subprocess of its own; engine start is excluded and each
side gets a warm-up call. With --rounds N each runs N times, interleaved,
and the best is kept.

    python -m bench.families OUT.json [--texts N] [--m3-texts N] [--rounds N]
    python -m bench.families child JOB.json      (one vLLM run; internal)
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from bench.models import BENCH, MODELS, ROOT, TINY
from tests.checkpoints import ensure_distilbert_of

DISTILBERT = MODELS / "splade-tiny-distilbert"
BGE_M3 = MODELS / "bge-m3-shaped-random"
DISTILBERT_SPLADE = {"architectures": ["DistilBertSpladeSparseEmbeddingModel"]}
BGE_M3_OVERRIDES = {"architectures": ["BgeM3EmbeddingModel"]}
CHECK_TOL = 1e-5


def ensure_bge_m3(corpus: list[str]) -> Path:
    if (BGE_M3 / "sparse_linear.pt").is_file():
        return BGE_M3
    import shutil

    from tokenizers import SentencePieceUnigramTokenizer
    from transformers import (XLMRobertaConfig, XLMRobertaModel,
                              XLMRobertaTokenizerFast)
    tmp = BGE_M3.with_name(BGE_M3.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    trainer = SentencePieceUnigramTokenizer()
    trainer.train_from_iterator(
        corpus,
        vocab_size=8000,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        unk_token="<unk>")
    trainer.save(str(tmp / "tokenizer.json"))
    XLMRobertaTokenizerFast(tokenizer_file=str(tmp / "tokenizer.json")
                            ).save_pretrained(tmp)
    torch.manual_seed(0)
    config = XLMRobertaConfig(vocab_size=250002,
                              hidden_size=384,
                              num_hidden_layers=6,
                              num_attention_heads=6,
                              intermediate_size=1536,
                              max_position_embeddings=514,
                              pad_token_id=1,
                              bos_token_id=0,
                              eos_token_id=2)
    XLMRobertaModel(config, add_pooling_layer=False).save_pretrained(tmp)
    torch.save(torch.nn.Linear(384, 1).state_dict(), tmp / "sparse_linear.pt")
    torch.save(torch.nn.Linear(384, 384).state_dict(),
               tmp / "colbert_linear.pt")
    tmp.rename(BGE_M3)
    return BGE_M3


def child(job_path: str) -> None:
    """One vLLM run: LLM.encode of the job's texts with its task."""
    job = json.loads(Path(job_path).read_text())
    from vllm import LLM
    from vllm.config import PoolerConfig
    texts = json.loads(Path(job["texts"]).read_text())
    llm = LLM(model=job["model"],
              runner="pooling",
              dtype="float32",
              enforce_eager=True,
              max_model_len=512,
              hf_overrides=job["overrides"],
              pooler_config=PoolerConfig(task=job["task"]))
    task = job["task"]
    warm = llm.encode(texts[:16], pooling_task=task, use_tqdm=False)
    if job.get("dump"):
        torch.save(torch.stack([o.outputs.data.float() for o in warm]),
                   job["dump"])
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    out = llm.encode(texts, pooling_task=task, use_tqdm=False)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    result = {"s": seconds, "cpu_s": cpu,
              "tokens": sum(len(o.prompt_token_ids) for o in out)}
    if task == "token_classify":
        # /embed_sparse's reduction by token id, as the API server runs it.
        from vllm_splade.embed_sparse.io_processor import (
            EmbedSparseIOProcessor)
        reducer = EmbedSparseIOProcessor.__new__(EmbedSparseIOProcessor)
        reducer.task = task
        reducer.vocab_size = llm.llm_engine.model_config.get_vocab_size()
        reducer.bos_token_id, reducer.eos_token_id = 0, 2
        reducer.unused_token_ids = torch.tensor([0, 1, 2, 3])
        start = time.perf_counter()
        terms = [
            torch.count_nonzero(reducer.to_vocab_weights(o)).item()
            for o in out
        ]
        result["reduce_s"] = time.perf_counter() - start
        result["terms_per_text"] = sum(terms) / len(terms)
    Path(job["out"]).write_text(json.dumps(result))


def vllm_run(name: str, model: Path, overrides: dict, task: str,
             texts_path: Path, dump: Path | None = None) -> dict:
    job_path = BENCH / f"families-{name}-job.json"
    out = BENCH / f"families-{name}.json"
    job_path.write_text(json.dumps({
        "model": str(model), "overrides": overrides, "task": task,
        "texts": str(texts_path), "out": str(out),
        "dump": str(dump) if dump else None}))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # .venv's patched build
    subprocess.run([sys.executable, "-m", "bench.families", "child",
                    str(job_path)], check=True, cwd=ROOT, env=env)
    return json.loads(out.read_text())


def st_run(path: Path, texts: list[str]) -> dict:
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(str(path), device="cpu")
    encoder.encode(texts[:32], batch_size=32)
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    encoder.encode(texts, batch_size=32)
    return {"s": time.perf_counter() - start,
            "cpu_s": time.process_time() - cpu}


def best(runs: dict, rounds: int) -> dict:
    """Each run `rounds` times, interleaved; the fastest of each."""
    result: dict[str, dict] = {}
    for _ in range(rounds):
        for name, run in runs.items():
            figures = run()
            print(f"bench: families {name} {figures['s']:.2f} s "
                  f"(CPU {figures['cpu_s']:.2f} s)", flush=True)
            if figures["s"] < result.get(name, {"s": float("inf")})["s"]:
                result[name] = figures
    return result


def main(out_path: str, num_texts: int, m3_texts: int, rounds: int) -> None:
    from sentence_transformers import SparseEncoder
    from transformers import AutoTokenizer

    from bench.corpus import make_corpus, subset
    from tests.models.language.pooling.test_splade_zero_flag import (
        save_sparse_encoder)
    corpus = make_corpus(AutoTokenizer.from_pretrained(TINY))
    BENCH.mkdir(parents=True, exist_ok=True)

    # DistilBERT SPLADE vs sentence-transformers.
    backbone = ensure_distilbert_of(str(TINY), DISTILBERT)
    folder = BENCH / "splade-tiny-distilbert-sparse-encoder"
    if not (folder / "modules.json").is_file():
        save_sparse_encoder(str(folder), str(backbone))
    texts = subset(corpus, num_texts)
    texts_path = BENCH / "families-distilbert-texts.json"
    texts_path.write_text(json.dumps(texts))
    dump = BENCH / "families-distilbert.pt"
    vllm_run("distilbert-check", backbone, DISTILBERT_SPLADE, "embed",
             texts_path, dump)
    want = SparseEncoder(str(folder), device="cpu").encode(
        texts[:16], convert_to_tensor=True,
        convert_to_sparse_tensor=False).float()
    diff = (torch.load(dump) - want).abs().max().item()
    if diff > CHECK_TOL:
        raise SystemExit(f"bench: DistilBERT differs from "
                         f"sentence-transformers by {diff:.3g}")
    distil = best({
        "vllm": lambda: vllm_run("distilbert", backbone, DISTILBERT_SPLADE,
                                 "embed", texts_path),
        "st": lambda: st_run(folder, texts),
    }, rounds)

    # BGE-M3: dense alone, lexical alone, both in one pass.
    m3 = ensure_bge_m3(corpus)
    m3_list = subset(corpus, m3_texts)
    m3_path = BENCH / "families-bge-m3-texts.json"
    m3_path.write_text(json.dumps(m3_list))
    bge = best({
        task: (lambda task=task: vllm_run(
            "bge-m3-" + task.replace("&", "+"), m3, BGE_M3_OVERRIDES, task,
            m3_path))
        for task in ("embed", "token_classify", "embed&token_classify")
    }, rounds)
    result = {
        "distilbert": {"texts": len(texts), "check_max_diff": diff,
                       "rounds": rounds, **distil},
        "bge_m3": {"texts": len(m3_list), "layers": 6, "hidden": 384,
                   "vocab": 250002, "rounds": rounds, **bge},
    }
    Path(out_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        child(sys.argv[2])
        sys.exit()
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--m3-texts", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    main(args.out, args.texts, args.m3_texts, args.rounds)
