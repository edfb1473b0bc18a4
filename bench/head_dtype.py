# SPDX-License-Identifier: Apache-2.0
"""The precision a SPLADE head in fp32 buys on a bf16 model, per family.

For each family, a SparseEncoder folder is encoded four ways, on the same
texts (the 53 parity texts and 200 bench-corpus texts):
- reference: sentence-transformers in fp32;
- sentence-transformers in bf16 (the whole model, head included);
- vLLM (patched build), bf16 engine, head in fp32 (`head_dtype: float32`);
- vLLM, bf16 engine, head in bf16 (`head_dtype: model`).
Each is compared with the reference: the largest and the mean absolute
error (over the terms either side has), the terms that appear or vanish
(with the largest weight among them), the lowest cosine, and what
retrieval sees: the dot products of every pair of texts (the largest
error relative to the text's best reference score) and the overlap of each text's
10 nearest texts by dot product.

Families: BERT and DistilBERT carry splade-tiny's trained weights; BERT
at BERT-base's shape, RoBERTa, XLM-RoBERTa and ModernBERT are seeded
random (no trained checkpoint of theirs is at hand offline), so their
figures show the arithmetic, not a trained model's term distribution.

vLLM runs eager (precision, not speed, is measured here; the speed of
each head is the pooling table's and the end-to-end table's), each family
in a process of its own.

    python -m bench.head_dtype OUT.json [--corpus N]
    python -m bench.head_dtype child JOB.json      (internal)
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from bench.e2e import st_vectors
from bench.models import BENCH, MODELS, ROOT, TINY

HEADS = {"head fp32": "float32", "head bf16": "model"}
TOP_K = 10


def folders() -> dict[str, tuple[Path, str]]:
    """Family -> (SparseEncoder folder, its SPLADE architecture)."""
    from bench.models import ensure_base
    from tests.checkpoints import (ensure_distilbert_of, ensure_folder,
                                   save_sparse_encoder_of)
    from tests.models.language.pooling.test_splade import save_random_splade
    root = BENCH / "head-dtype"
    root.mkdir(parents=True, exist_ok=True)

    def sparse_encoder(name: str, masked_lm: Path) -> Path:
        return ensure_folder(save_sparse_encoder_of, str(masked_lm),
                             root / f"{name}-sparse-encoder")

    def random(architecture: str) -> Path:
        out = root / architecture
        if not (out / "config.json").is_file():
            save_random_splade(str(out), architecture)
        return out

    distilbert = ensure_distilbert_of(str(TINY), MODELS / "splade-tiny-distilbert")
    return {
        "BERT (splade-tiny, trained)":
        (sparse_encoder("bert-tiny", TINY), "BertSpladeSparseEmbeddingModel"),
        "DistilBERT (splade-tiny's weights)":
        (sparse_encoder("distilbert-tiny", distilbert),
         "DistilBertSpladeSparseEmbeddingModel"),
        "BERT-base shape (random)":
        (sparse_encoder("bert-base", ensure_base()),
         "BertSpladeSparseEmbeddingModel"),
        "RoBERTa (random)":
        (sparse_encoder("roberta", random("RobertaForMaskedLM")),
         "RobertaSpladeSparseEmbeddingModel"),
        "XLM-RoBERTa (random)":
        (sparse_encoder("xlm-roberta", random("XLMRobertaForMaskedLM")),
         "RobertaSpladeSparseEmbeddingModel"),
        "ModernBERT (random)":
        (sparse_encoder("modernbert", random("ModernBertForMaskedLM")),
         "ModernBertSpladeSparseEmbeddingModel"),
    }


def texts(num_corpus: int) -> list[str]:
    from transformers import AutoTokenizer

    from bench.corpus import make_corpus, subset
    from tests.models.language.pooling.splade_texts import PARITY_TEXTS
    corpus = make_corpus(AutoTokenizer.from_pretrained(str(TINY)))
    return PARITY_TEXTS + subset(corpus, num_corpus)


def fitting(folder: Path, texts: list[str]) -> list[str]:
    """The texts the folder's model takes whole."""
    from transformers import AutoConfig, AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    limit = AutoConfig.from_pretrained(str(folder)).max_position_embeddings - 4
    lens = [len(ids) for ids in tokenizer(texts)["input_ids"]]
    return [t for t, n in zip(texts, lens) if n <= limit]


def child(job_path: str) -> None:
    """Both bf16 engines of one family: their vectors to job['out']."""
    from vllm import LLM
    job = json.loads(Path(job_path).read_text())
    out = {}
    for name, head_dtype in HEADS.items():
        llm = LLM(model=job["model"], runner="pooling", dtype="bfloat16",
                  enforce_eager=True, seed=0,
                  hf_overrides={"architectures": [job["architecture"]],
                                "head_dtype": head_dtype})
        outputs = llm.encode(job["texts"], pooling_task="embed", use_tqdm=False)
        out[name] = torch.stack([o.outputs.data.float() for o in outputs])
        del llm
    torch.save(out, job["out"])


def vllm_vectors(folder: Path, architecture: str,
                 texts: list[str]) -> dict[str, torch.Tensor]:
    job = BENCH / "head-dtype" / "job.json"
    out = job.with_suffix(".pt")
    job.write_text(json.dumps(dict(model=str(folder), architecture=architecture,
                                   texts=texts, out=str(out))))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "bench.head_dtype", "child", str(job)],
                   check=True, env=env)
    return torch.load(out)


def compare(x: torch.Tensor, ref: torch.Tensor) -> dict[str, float]:
    """`x` against the reference vectors `ref` ([texts, vocab] each)."""
    diff = (x - ref).abs()
    union = (x != 0) | (ref != 0)
    appear = (x != 0) & (ref == 0)
    vanish = (x == 0) & (ref != 0)
    flipped = torch.where(appear, x, 0).abs().amax().item(), ref[vanish].amax(
    ).item() if vanish.any() else 0.0
    scores, ref_scores = x @ x.T, ref @ ref.T
    # Each text's score errors relative to its best reference score.
    score_err = (scores - ref_scores).abs() / ref_scores.amax(1, keepdim=True)
    top = min(TOP_K, len(ref) - 1)

    def nearest(s: torch.Tensor) -> torch.Tensor:
        return s.fill_diagonal_(float("-inf")).topk(top, dim=1).indices

    near, ref_near = nearest(scores.clone()), nearest(ref_scores.clone())
    overlap = sum(len(set(a.tolist()) & set(b.tolist()))
                  for a, b in zip(near, ref_near)) / (top * len(ref))
    return {
        "max_abs": diff.max().item(),
        "mean_abs": (diff[union].mean().item() if union.any() else 0.0),
        "ref_terms": int((ref != 0).sum()),
        "appear": int(appear.sum()),
        "vanish": int(vanish.sum()),
        "flipped_max_weight": max(flipped),
        "min_cosine": torch.nn.functional.cosine_similarity(x, ref).min().item(),
        "max_score_rel_err": score_err.max().item(),
        "top10_overlap": overlap,
    }


def main(out_path: str, num_corpus: int) -> None:
    all_texts = texts(num_corpus)
    rows = []
    for family, (folder, architecture) in folders().items():
        print(f"bench: head dtype, {family}", file=sys.stderr, flush=True)
        # The random families' position tables hold 128 tokens.
        batch = fitting(folder, all_texts)
        ref = st_vectors(folder, batch, torch.float32)
        runs = {"sentence-transformers bf16": st_vectors(folder, batch,
                                                         torch.bfloat16)}
        runs.update((f"vLLM bf16, {k}", v) for k, v in vllm_vectors(
            folder, architecture, batch).items())
        for name, vectors in runs.items():
            rows.append(dict(family=family, run=name, texts=len(batch),
                             **compare(vectors, ref)))
    Path(out_path).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2])
        sys.exit()
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--corpus", type=int, default=200)
    args = parser.parse_args()
    main(args.out, args.corpus)
