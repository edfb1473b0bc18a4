# SPDX-License-Identifier: Apache-2.0
"""Tensor parallel 2 gives the TP=1 results for every family the series
serves: SPLADE vectors of BERT, RoBERTa, DistilBERT and ModernBERT
SparseEncoder folders, and the per-token masked-LM distributions of the
BERT, DistilBERT and ModernBERT masked-LM classes (whose decoder is tied
to a vocab-parallel embedding: at TP=2 each rank holds half of its rows).

The TP=2 engines run in two ranks started by torch.distributed.run with
vLLM's external launcher (tp_encode.py): one vLLM import per rank for all
seven models, where `vllm serve` would spawn and import per model."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, free_engine, make_llm
from tests.models.language.pooling.test_splade import (
    TEXTS, assert_same_sparse_vectors, save_random_splade, save_sparse_encoder)

SPLADE = {
    "BertForMaskedLM": "BertSpladeSparseEmbeddingModel",
    "RobertaForMaskedLM": "RobertaSpladeSparseEmbeddingModel",
    "DistilBertForMaskedLM": "DistilBertSpladeSparseEmbeddingModel",
    "ModernBertForMaskedLM": "ModernBertSpladeSparseEmbeddingModel",
}
MASKED_LM = ["BertForMaskedLM", "DistilBertForMaskedLM", "ModernBertForMaskedLM"]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("families")
    jobs = []
    for architecture, splade in SPLADE.items():
        backbone = str(root / architecture)
        save_random_splade(backbone, architecture)
        folder = str(root / f"{architecture}-sparse-encoder")
        save_sparse_encoder(folder, backbone, "max", "relu")
        jobs.append(dict(model=folder, task="embed", architecture=splade))
        if architecture in MASKED_LM:
            jobs.append(dict(model=backbone, task="token_classify",
                             architecture=architecture))
    return jobs


def tp2_results(jobs: list[dict], tmp_path: Path, site: str | None = None) -> dict:
    """TP=2 results of `jobs`, with the vLLM of `site` (the venv's if None)."""
    job_file, out_file = tmp_path / "job.json", tmp_path / "out.pt"
    job_file.write_text(json.dumps({"texts": TEXTS, "models": jobs}))
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0",
               # One core per rank: the CPU worker binds rank N to node N,
               # which a one-node machine lacks.
               VLLM_CPU_OMP_THREADS_BIND="0|1",
               PYTHONPATH=os.pathsep.join(
                   filter(None, [str(ROOT), site, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node", "2",
         str(ROOT / "tests/distributed/tp_encode.py"), str(job_file),
         str(out_file)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return torch.load(out_file)


_tp1: dict[str, object] = {}


def tp1_result(job: dict):
    """The TP=1 result of a job, made once for both tests (an engine each)."""
    if job["model"] not in _tp1:
        _tp1[job["model"]] = _tp1_result(job)
    return _tp1[job["model"]]


def _tp1_result(job: dict):
    llm = make_llm(job["model"], hf_overrides=None, max_model_len=None)
    try:
        assert llm.model_config.architecture == job["architecture"]
        if job["task"] == "embed":
            return torch.tensor(
                [o.outputs.embedding for o in llm.embed(TEXTS, use_tqdm=False)])
        return [o.outputs.data.float() for o in llm.encode(
            TEXTS, pooling_task="token_classify", use_tqdm=False)]
    finally:
        free_engine(llm)


def test_tensor_parallel_2_equals_1(jobs, tmp_path):
    got = tp2_results(jobs, tmp_path)
    for job in jobs:
        name = f"{job['architecture']} ({job['task']})"
        assert got[job["model"] + ":architecture"] == job["architecture"]
        want = tp1_result(job)
        if job["task"] == "embed":
            assert_same_sparse_vectors(got[job["model"]], want)
        else:
            for g, w in zip(got[job["model"]], want, strict=True):
                torch.testing.assert_close(g, w, rtol=0, atol=1e-5, msg=name)
        print(f"\n{name}: TP=2 equals TP=1")


def test_stock_vllm_with_the_plugin_at_tensor_parallel_2(jobs, tmp_path):
    """Stock vLLM 0.34.0 (the unpatched CPU build) with the vllm-splade
    plugin serves the SPLADE families whose TP=2 needs no core fix (all but
    ModernBERT, whose attention heads patch 2 fixes) at TP=2 with the
    series' TP=1 vectors."""
    stock = os.environ.get("SPLADE_STOCK_SITE",
                           str(ROOT / "build/vllm-base-site"))
    if not os.path.isdir(os.path.join(stock, "vllm")):
        pytest.fail(f"{stock} has no vLLM: run scripts/build-base-site.sh")
    splade = [job for job in jobs if job["task"] == "embed" and
              job["architecture"] != "ModernBertSpladeSparseEmbeddingModel"]
    got = tp2_results(splade, tmp_path, site=stock)
    assert "+base." in got["vllm"]
    for job in splade:
        assert got[job["model"] + ":architecture"] == job["architecture"]
        assert_same_sparse_vectors(got[job["model"]], tp1_result(job))
