# SPDX-License-Identifier: Apache-2.0
"""The eval: index a corpus through two vLLM servers into the engines, run
the known-item queries end to end, check SPLADE's rankings against
sentence-transformers' vectors, write the results as JSON.

    python -m hybrid.run OUT.json --sparse-url URL --dense-url URL \
        --sparse-model FOLDER --dense-model FOLDER [--docs N] [--queries N]

The servers are started by the caller (scripts/eval.sh, or the smoke test),
the way a user runs them: `vllm serve FOLDER`.
"""
import argparse
import functools
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from hybrid import clients, corpus, engines, metrics

TOP = 10  # the rankings compared with sentence-transformers'
TIE = 1e-4  # relative score difference that counts as a tie
CONCURRENCY = 4  # indexing requests in flight
MILVUS_BATCH = 1000  # rows an insert call
IDLE_QUERIES = 200  # searched again with the servers idle


def log(msg: str) -> None:
    print(f"eval: {msg}", flush=True)


def st_vectors(folder: str, queries: list[str], docs: list[str]):
    """sentence-transformers' SPLADE vectors of the same texts, as CSR."""
    import scipy.sparse as sp
    import torch
    from sentence_transformers import SparseEncoder

    def csr(t: torch.Tensor) -> sp.csr_matrix:
        t = t.coalesce().cpu()
        i = t.indices().numpy()
        return sp.csr_matrix((t.values().float().numpy(), (i[0], i[1])),
                             shape=tuple(t.shape))

    model = SparseEncoder(folder, device="cpu")
    start = time.perf_counter()
    d = csr(model.encode_document(docs, batch_size=32,
                                  convert_to_sparse_tensor=True))
    seconds = time.perf_counter() - start
    q = csr(model.encode_query(queries, batch_size=32,
                               convert_to_sparse_tensor=True))
    return q, d, seconds


def compare_rankings(vllm_top: np.ndarray, st_top: np.ndarray,
                     st_scores: np.ndarray) -> dict:
    """vLLM's exact top-10 against sentence-transformers': identical, or
    different only among ties (vLLM's list, scored with sentence-transformers'
    vectors, has the same score at every rank within TIE), or different."""
    same = tied = 0
    differ = []
    for q in range(len(vllm_top)):
        a, b = vllm_top[q, :TOP], st_top[q, :TOP]
        if (a == b).all():
            same += 1
            continue
        sa, sb = st_scores[q, a], st_scores[q, b]
        if np.all(np.abs(sa - sb) <= TIE * np.maximum(1.0, np.abs(sb))):
            tied += 1
        else:
            differ.append(q)
    return {"queries": len(vllm_top), "identical": same,
            "differ_by_ties": tied, "differ": len(differ),
            "differing_queries": differ[:20], "tie": TIE}


def overlap(a: list[list[int]], b: np.ndarray, k: int = TOP) -> float:
    """Mean fraction of b's top-k that a's top-k finds (ANN vs exact)."""
    return float(np.mean([len(set(x[:k]) & set(y[:k].tolist())) / k
                          for x, y in zip(a, b)]))


def over_length(folder: str, texts: list[str], limit: int) -> float:
    """Fraction of texts longer than `limit` tokens (special tokens in)."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder)
    lengths = [len(ids) for ids in tokenizer(texts)["input_ids"]]
    return float(np.mean([n > limit for n in lengths]))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--sparse-url", required=True)
    p.add_argument("--dense-url", required=True)
    p.add_argument("--sparse-model", required=True,
                   help="the folder served at --sparse-url (reference)")
    p.add_argument("--dense-model", required=True,
                   help="the folder served at --dense-url")
    p.add_argument("--dense-name", default="all-MiniLM-L6-v2",
                   help="its --served-model-name")
    p.add_argument("--docs", type=int, default=10000)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--work", default="build/eval")
    p.add_argument("--sparse-index", default=None,
                   help="take the documents' SPLADE vectors from `make index`'s "
                   "output (encoded from --sparse-model) instead of encoding "
                   "them through --sparse-url")
    args = p.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)

    task = corpus.load_task(args.docs, args.queries)
    texts = [d.text for d in task.docs]
    questions = [q for q, _ in task.queries]
    relevant = [d for _, d in task.queries]
    log(f"{len(texts)} documents, {len(questions)} queries "
        f"({task.eligible} of {task.packages} Debian packages can be asked)")

    sparse = functools.partial(clients.embed_sparse, args.sparse_url)
    dense = functools.partial(clients.embed_dense, args.dense_url,
                              model=args.dense_name)
    from transformers import AutoConfig
    vocab = AutoConfig.from_pretrained(args.sparse_model).vocab_size
    limits = {"splade": clients.max_model_len(args.sparse_url),
              "dense": clients.max_model_len(args.dense_url)}
    truncated = {
        "splade": over_length(args.sparse_model, texts, limits["splade"]),
        "dense": over_length(args.dense_model, texts, limits["dense"]),
    }
    sparse([texts[0]]), dense([texts[0]])  # warm

    # Indexing: documents through vLLM, then into the engines.
    if args.sparse_index:
        from index import load
        m = load.manifest(Path(args.sparse_index), Path(args.sparse_model))
        doc_sparse = load.vectors(Path(args.sparse_index), task.doc_ids)
        # The index job's encoding time in its actors, per document.
        t_sparse = len(texts) * sum(
            s["seconds"] for s in m["shards"]) / m["documents"]
        log(f"SPLADE documents from {args.sparse_index} (make index: "
            f"vLLM {m['vllm']}, dtype {m['dtype']})")
    else:
        doc_sparse, t_sparse = clients.encode_all(
            sparse, texts, CONCURRENCY, progress="SPLADE documents")
    doc_dense, t_dense = clients.encode_all(
        dense, texts, CONCURRENCY, progress="dense documents")
    doc_dense = np.stack(doc_dense)
    start = time.perf_counter()
    milvus = engines.Milvus(work / "milvus.db", doc_dense.shape[1])
    milvus.insert(list(range(len(texts))), doc_sparse, doc_dense,
                  MILVUS_BATCH)
    t_milvus = time.perf_counter() - start
    log(f"Milvus Lite: {len(texts)} rows inserted and flushed in "
        f"{t_milvus:.1f} s")
    doc_csr = clients.to_csr(doc_sparse, vocab)
    start = time.perf_counter()
    seismic_index = engines.Seismic(doc_csr, work / "seismic")
    t_seismic = time.perf_counter() - start
    start = time.perf_counter()
    bm25 = engines.BM25(texts, work / "bm25s")
    t_bm25 = time.perf_counter() - start
    log(f"Seismic {t_seismic:.1f} s, bm25s {t_bm25:.1f} s (build and save)")

    # Queries, end to end: the embedding request(s) to vLLM, then the
    # search, each timed. One method at a time over all the queries, so no
    # method runs in another's wake; hybrid sends both requests at once.
    pool = ThreadPoolExecutor(2)

    def both(q):
        s, d = pool.submit(sparse, [q]), pool.submit(dense, [q])
        return s.result()[0], d.result()[0]

    def min_max(v):
        s, d = v
        return engines.fuse_min_max([milvus.search_scored("sparse", s),
                                     milvus.search_scored("dense", d)],
                                    engines.WEIGHTS)

    methods = {  # name: (embed the query, search with it)
        "BM25 (bm25s)": (lambda q: q, bm25.search),
        "SPLADE (Milvus Lite)": (lambda q: sparse([q])[0],
                                 functools.partial(milvus.search, "sparse")),
        "SPLADE (Seismic)": (lambda q: sparse([q])[0], seismic_index.search),
        "dense (Milvus Lite)": (lambda q: dense([q])[0],
                                functools.partial(milvus.search, "dense")),
        "hybrid RRF (Milvus Lite)":
        (both, lambda v: milvus.search_hybrid(*v, fusion="rrf")),
        "hybrid WeightedRanker (Milvus Lite)":
        (both, lambda v: milvus.search_hybrid(*v, fusion="weighted")),
        "hybrid min-max (client)": (both, min_max),
    }
    results, rankings, query_vectors = {}, {}, {}
    for m, (embed, search) in methods.items():
        search(embed(questions[-1]))  # warm this path
        ranks, total, embedding, searching, vectors = [], [], [], [], []
        for q in questions:
            start = time.perf_counter()
            vector = embed(q)
            mid = time.perf_counter()
            ranks.append(search(vector))
            end = time.perf_counter()
            total.append(end - start)
            embedding.append(mid - start)
            searching.append(end - mid)
            vectors.append(vector)
        rankings[m], query_vectors[m] = ranks, vectors
        results[m] = {
            **metrics.scores(ranks, relevant),
            **metrics.percentiles(total),
            "embed_p50_ms": metrics.percentiles(embedding)["p50_ms"],
            "search_p50_ms": metrics.percentiles(searching)["p50_ms"],
            "search_p99_ms": metrics.percentiles(searching)["p99_ms"],
        }
        log(f"{m}: nDCG@10 {results[m]['ndcg@10']:.3f}, p50 "
            f"{results[m]['p50_ms']:.1f} ms")
    pool.shutdown()
    # The searches again, with the vectors already made and the servers
    # idle: on a machine this small, a vLLM engine keeps its core busy for a
    # while after each request, which slows a search running beside it.
    time.sleep(3)
    for m, (_, search) in methods.items():
        idle = []
        for vector in query_vectors[m][:IDLE_QUERIES]:
            start = time.perf_counter()
            search(vector)
            idle.append(time.perf_counter() - start)
        results[m]["search_idle_p50_ms"] = metrics.percentiles(idle)["p50_ms"]
        results[m]["search_idle_p99_ms"] = metrics.percentiles(idle)["p99_ms"]
    # The scores WeightedRanker normalises (Milvus: 0.5 + atan(s) / pi).
    top1 = {f: float(np.median([milvus.search_scored(f, v, 1)[0][1]
                                for v in vecs[:100]]))
            for f, vecs in [("sparse", query_vectors["SPLADE (Milvus Lite)"]),
                            ("dense", query_vectors["dense (Milvus Lite)"])]}

    # SPLADE through vLLM against sentence-transformers, same texts; the
    # query vectors are those the engines were searched with.
    query_csr = clients.to_csr(query_vectors["SPLADE (Milvus Lite)"], vocab)
    log("sentence-transformers' vectors of the same texts (the reference)")
    st_q, st_d, t_st = st_vectors(args.sparse_model, questions, texts)
    vllm_top, _ = engines.exact_top(query_csr, doc_csr, engines.K)
    st_top, st_scores = engines.exact_top(st_q, st_d, TOP)
    reference = compare_rankings(vllm_top, st_top, st_scores)
    reference["max_abs_diff_documents"] = float(abs(doc_csr - st_d).max())
    reference["max_abs_diff_queries"] = float(abs(query_csr - st_q).max())
    reference["milvus_vs_exact@10"] = overlap(
        rankings["SPLADE (Milvus Lite)"], vllm_top)
    reference["seismic_vs_exact@10"] = overlap(rankings["SPLADE (Seismic)"],
                                               vllm_top)
    reference["exact"] = metrics.scores([t.tolist() for t in vllm_top],
                                        relevant)
    log(f"vLLM vs sentence-transformers: {reference}")

    nnz = int(doc_csr.nnz)
    out = {
        "corpus": {"source": corpus.CORPUS.name, "documents": len(texts),
                   "queries": len(questions), "eligible": task.eligible,
                   "packages": task.packages, "min_words": corpus.MIN_WORDS,
                   "mean_words": float(np.mean([len(t.split())
                                                for t in texts])),
                   "max_model_len": limits, "over_length": truncated},
        "machine": {"cpu": _cpu(), "cores": len(os.sched_getaffinity(0)),
                    "python": platform.python_version()},
        "settings": {"batch": clients.BATCH, "concurrency": CONCURRENCY,
                     "milvus_batch": MILVUS_BATCH, "k": engines.K,
                     "idle_queries": min(IDLE_QUERIES, len(questions)),
                     "rrf_k": engines.RRF_K, "weights": list(engines.WEIGHTS),
                     "seismic_query_cut": engines.Seismic.QUERY_CUT,
                     "seismic_heap_factor": engines.Seismic.HEAP_FACTOR,
                     "median_top1_score": top1},
        "methods": results,
        "indexing": {
            "splade_from": args.sparse_index or args.sparse_url,
            # From an index: its actors' encoding time (no engine start, no
            # HTTP), not a server's wall clock.
            "splade_rate_measured": "in make index's actors" if args.sparse_index
            else "through the server",
            "splade_docs_per_s": len(texts) / t_sparse,
            "dense_docs_per_s": len(texts) / t_dense,
            "milvus_insert_s": t_milvus,
            "into_milvus_docs_per_s": len(texts) / (t_sparse + t_dense +
                                                    t_milvus),
            "seismic_build_s": t_seismic, "bm25_index_s": t_bm25,
            "st_splade_docs_per_s": len(texts) / t_st,
            "splade_terms_per_doc": nnz / len(texts),
        },
        "sizes": {"milvus_lite_bytes": milvus.size(),
                  "seismic_bytes": seismic_index.size(),
                  "bm25s_bytes": bm25.size(),
                  "splade_vectors_bytes": nnz * 8,
                  "dense_vectors_bytes": int(doc_dense.nbytes)},
        "reference": reference,
    }
    milvus.close()
    Path(args.out).write_text(json.dumps(out, indent=1))
    log(f"wrote {args.out}")
    return out


def _cpu() -> str:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    main()
