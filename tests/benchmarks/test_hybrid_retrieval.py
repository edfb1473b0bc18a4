# SPDX-License-Identifier: Apache-2.0
"""A smoke of `make eval` (hybrid/, docs/eval.md) and the "Hybrid search"
example of docs/usage.md: splade-tiny (SparseEncoder folder) and
all-MiniLM-L6-v2 served by the patched vLLM, a few hundred real Debian
package descriptions indexed into Milvus Lite, Seismic and bm25s, the
known-item queries run end to end, and SPLADE's rankings through vLLM
checked against sentence-transformers' vectors of the same texts."""
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hybrid import corpus, models, report, run
from tests.utils import SpladeServer, usage_example

ROOT = Path(__file__).resolve().parents[2]
DOCS, QUERIES = 300, 50


@pytest.fixture(scope="module")
def servers():
    """Both models served, each engine on a core of its own as
    scripts/eval.sh does (eager here, to start faster), started together."""
    sparse = str(models.ensure_splade(ROOT / "build/models/splade-tiny",
                                      ROOT / models.SPLADE))
    dense = str(models.check_dense(ROOT / models.DENSE))
    s = SpladeServer(sparse, hf_overrides=None, name="splade-tiny",
                     env={"VLLM_CPU_OMP_THREADS_BIND": "0"})
    d = SpladeServer(dense, hf_overrides=None, name="all-MiniLM-L6-v2",
                     env={"VLLM_CPU_OMP_THREADS_BIND": "1"})
    with contextlib.ExitStack() as stack:
        for server in (s, d):  # both start at once
            server.start()
            stack.callback(server.__exit__)
        yield s.wait_healthy(), d.wait_healthy(), sparse, dense


@pytest.fixture(scope="module")
def results(servers, tmp_path_factory):
    s, d, sparse, dense = servers
    work = tmp_path_factory.mktemp("eval")
    out = run.main([
        str(work / "results.json"), "--work", str(work),
        "--sparse-url", s.url, "--sparse-model", sparse,
        "--dense-url", d.url, "--dense-model", dense,
        "--docs", str(DOCS), "--queries", str(QUERIES)
    ])
    return work, out


def test_splade_through_vllm_ranks_as_sentence_transformers(results):
    ref = results[1]["reference"]
    assert ref["queries"] == QUERIES
    assert ref["differ"] == 0, ref
    assert ref["identical"] + ref["differ_by_ties"] == QUERIES
    assert ref["max_abs_diff_documents"] < 1e-4
    assert ref["max_abs_diff_queries"] < 1e-4
    # Milvus Lite's sparse inverted index searches exactly.
    assert ref["milvus_vs_exact@10"] >= 0.99
    assert ref["seismic_vs_exact@10"] >= 0.9


def test_every_method_finds_the_known_items(results):
    _, out = results
    assert out["corpus"]["documents"] == DOCS
    assert set(out["methods"]) == {
        "BM25 (bm25s)", "SPLADE (Milvus Lite)", "SPLADE (Seismic)",
        "dense (Milvus Lite)", "hybrid RRF (Milvus Lite)",
        "hybrid WeightedRanker (Milvus Lite)", "hybrid min-max (client)"
    }
    for name, m in out["methods"].items():
        # Measured on this corpus sample: MRR@10 0.91-0.97, Recall@100
        # 1.0; wrong vectors or ids would score near 1/DOCS.
        assert m["mrr@10"] > 0.6, (name, m)
        assert m["recall@100"] > 0.9, (name, m)
        assert 0 < m["p50_ms"] <= m["p99_ms"]
    # The SPLADE rows are the same vectors in two engines.
    sparse = out["methods"]["SPLADE (Milvus Lite)"]
    assert sparse["mrr@10"] == pytest.approx(out["reference"]["exact"]["mrr@10"],
                                             abs=0.02)
    assert out["sizes"]["milvus_lite_bytes"] > 0
    assert out["indexing"]["splade_docs_per_s"] > 0


def test_the_report_renders(results, tmp_path):
    work, out = results
    page = report.page(out, [], 0.0, "eval.png", "make eval", {})
    assert "| SPLADE (Milvus Lite) |" in page
    assert "The check failed" not in page
    assert f"{QUERIES} of {QUERIES}" in page
    report.plot(out, tmp_path / "eval.png")
    assert (tmp_path / "eval.png").stat().st_size > 10_000
    assert json.loads((work / "results.json").read_text()) == out


def test_the_usage_example_runs(servers, tmp_path):
    """docs/usage.md's example, as written, against the two servers it
    starts (here: the fixture's, on other ports)."""
    s, d, sparse, dense = servers
    shell, python = usage_example("Hybrid search")
    assert f"vllm serve {models.SPLADE} --port 8000" in shell
    assert f"vllm serve {models.DENSE} --port 8001" in shell
    code = python
    for written, here in [("http://localhost:8000", s.url),
                          ("http://localhost:8001", d.url),
                          ('"hybrid.db"', repr(str(tmp_path / "hybrid.db")))]:
        assert code.count(written) == 1, written
        code = code.replace(written, here)
    for _ in range(2):  # and again: it starts from an empty collection
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "docs/usage.md", "exec"), {})
        assert printed.getvalue().startswith("['catcodec decodes"), \
            printed.getvalue()


def test_the_haystack_example_runs(servers, tmp_path):
    """docs/usage.md's "Haystack" example, as written, in the Haystack venv
    (a client application's environment), against the two servers."""
    from tests.entrypoints.openai.test_haystack import haystack_python
    s, d, sparse, dense = servers
    shell, python = usage_example("Haystack")
    assert (f"VLLM_PLUGINS=vllm_splade,vllm_splade_embed_sparse vllm serve "
            f"{models.SPLADE} --port 8000") in shell
    assert (f"vllm serve {models.DENSE} --served-model-name "
            f"{d.model} --port 8001") in shell
    code = python
    for written, here in [("http://localhost:8000", s.url),
                          ("http://localhost:8001", d.url)]:
        assert code.count(written) == 1, written
        code = code.replace(written, here)
    script = tmp_path / "example.py"
    script.write_text(code)
    proc = subprocess.run(
        [haystack_python(), str(script)], capture_output=True, text=True,
        timeout=300, env={k: v for k, v in os.environ.items()
                          if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith(
        "['Paris is the capital and largest city of France.'"), proc.stdout


def test_splade_vectors_from_make_index_score_the_same(servers, results,
                                                       tmp_path):
    """`make eval EVAL_INDEX=...`: the documents' SPLADE vectors from `make
    index`'s shards (a local Ray, one engine actor: stock vLLM + the
    plugin, fp32) instead of the server's; every method scores as before."""
    from tests.index.cluster import ENV
    s, d, sparse, dense = servers
    task = corpus.load_task(DOCS, QUERIES)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(
        json.dumps({"id": i, "text": p.text}) + "\n"
        for i, p in zip(task.doc_ids, task.docs)))
    site = os.environ.get("SPLADE_STOCK_SITE", str(ROOT / "build/vllm-base-site"))
    index = tmp_path / "index"
    proc = subprocess.run(
        [sys.executable, "-m", "index.run", "--input", str(jsonl), "--out",
         str(index), "--model", sparse, "--dtype", "float32", "--shard-size",
         "100", "--vllm-site", site],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = run.main([
        str(tmp_path / "results.json"), "--work", str(tmp_path),
        "--sparse-url", s.url, "--sparse-model", sparse,
        "--dense-url", d.url, "--dense-model", dense,
        "--docs", str(DOCS), "--queries", str(QUERIES),
        "--sparse-index", str(index)
    ])
    assert out["indexing"]["splade_from"] == str(index)
    for name, m in results[1]["methods"].items():
        for metric in ("ndcg@10", "mrr@10", "recall@100"):
            assert out["methods"][name][metric] == m[metric], (name, metric)
    assert out["reference"]["differ"] == 0
