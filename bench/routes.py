# SPDX-License-Identifier: Apache-2.0
"""Inference-free SparseEncoder: the query route (token weights, no model
run) against the document route (the masked-LM model), side by side.

The Router folder is splade-tiny as the document route and a seeded random
weight per token as the query route, saved by sentence-transformers
(`Router.for_query_document`, as the tests build it). The same short
queries (the first 2-12 words of each corpus text) go through both routes:
- offline: `LLM.embed(queries, prompt_name=...)` and each output's
  `.sparse` terms, queries/s, best of --rounds;
- served: POST /embed_sparse with one query per request, one client after
  the other on loopback (latency, not throughput), after a warm-up.
Both routes are first checked against sentence-transformers'
`encode_query` / `encode_document` on 16 queries (same non-zero terms,
<= 1e-5), or the run stops.

    python -m bench.routes OUT.json [--queries N] [--requests N] [--rounds N]
"""
import argparse
import gc
import json
import random
import statistics
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from bench.corpus import make_corpus
from bench.models import BENCH, TINY
from tests.utils import SpladeServer

ROUTER = BENCH / "splade-tiny-inference-free"
ROUTES = ("query", "document")


def ensure_router() -> Path:
    """splade-tiny as an inference-free SparseEncoder folder (made once)."""
    if (ROUTER / "router_config.json").is_file():
        return ROUTER
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sparse_encoder.modules import (
        SparseStaticEmbedding, SpladePooling, Transformer)
    transformer = Transformer(str(TINY), transformer_task="fill-mask")
    vocab = len(transformer.tokenizer.get_vocab())
    weight = torch.rand(vocab, generator=torch.Generator().manual_seed(0))
    query = SparseStaticEmbedding(transformer.tokenizer, weight=weight,
                                  frozen=True)
    router = Router.for_query_document(
        query_modules=[query],
        document_modules=[transformer, SpladePooling("max")])
    SparseEncoder(modules=[router], device="cpu").save(str(ROUTER))
    return ROUTER


def make_queries(n: int) -> list[str]:
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    rng = random.Random(0)
    texts = make_corpus(tokenizer, n)
    return [" ".join(t.split()[:rng.randint(2, 12)]) for t in texts]


def check(llm, path: Path, queries: list[str]) -> dict:
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(str(path), device="cpu")
    worst = {}
    for route, encode in (("query", encoder.encode_query),
                          ("document", encoder.encode_document)):
        want = encode(queries, convert_to_tensor=True).to_dense()
        diff = 0.0
        for out, w in zip(llm.embed(queries, prompt_name=route,
                                    use_tqdm=False), want):
            sparse = out.outputs.sparse
            if sparse.indices != torch.nonzero(w).squeeze(1).tolist():
                raise SystemExit(f"bench: {route} route: other non-zero "
                                 "terms than sentence-transformers")
            diff = max(diff, (torch.tensor(sparse.values) -
                              w[sparse.indices]).abs().max().item())
        if diff > 1e-5:
            raise SystemExit(f"bench: {route} route off by {diff:.1e}")
        worst[route] = diff
    print(f"bench: routes match sentence-transformers on {len(queries)} "
          f"queries: max |diff| {worst}", flush=True)
    return worst


def offline(path: Path, queries: list[str], rounds: int) -> dict:
    from vllm import LLM
    llm = LLM(model=str(path), dtype="float32", enforce_eager=True,
              max_model_len=512)
    result = {"check_max_diff": check(llm, path, queries[:16])}
    for route in ROUTES:
        llm.embed(queries[:16], prompt_name=route, use_tqdm=False)  # warm
        best = float("inf")
        for _ in range(rounds):
            gc.collect()
            start = time.perf_counter()
            out = llm.embed(queries, prompt_name=route, use_tqdm=False)
            terms = [o.outputs.sparse for o in out]
            best = min(best, time.perf_counter() - start)
        result[route] = {
            "s": best, "qps": len(queries) / best,
            "terms_median": statistics.median(len(t.indices) for t in terms)
        }
        print(f"bench: offline {route:8s} {len(queries) / best:9.1f} "
              f"queries/s ({best:.3f} s)", flush=True)
    del llm
    gc.collect()
    return result


def served(path: Path, queries: list[str]) -> dict:
    result = {}
    with SpladeServer(str(path), hf_overrides=None) as server:
        for route in ROUTES:
            body = {"inputs": "warm up", "prompt_name": route}
            assert server.request("/embed_sparse", body)[0] == 200
            times = []
            for query in queries:
                body = {"inputs": query, "prompt_name": route}
                start = time.perf_counter()
                status, data = server.request("/embed_sparse", body)
                times.append(time.perf_counter() - start)
                assert status == 200, data[:300]
            result[route] = {
                "ms_median": 1000 * statistics.median(times),
                "ms_p99": 1000 * sorted(times)[int(0.99 * len(times))],
                "qps": len(times) / sum(times),
            }
            print(f"bench: served  {route:8s} {result[route]['qps']:9.1f} "
                  f"queries/s, p50 {result[route]['ms_median']:.1f} ms",
                  flush=True)
    return result


def main(out_path: str, num_queries: int, num_requests: int,
         rounds: int) -> None:
    path = ensure_router()
    queries = make_queries(num_queries)
    result = {"queries": len(queries), "requests": num_requests,
              "rounds": rounds, "model": "splade-tiny",
              "words": [2, 12]}
    result["offline"] = offline(path, queries, rounds)
    result["served"] = served(path, queries[:num_requests])
    Path(out_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    main(args.out, args.queries, args.requests, args.rounds)
