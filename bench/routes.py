# SPDX-License-Identifier: Apache-2.0
"""Inference-free sparse encoder: the query route (a weight per token, no
model run) against the document route (SPLADE on the masked-LM model), and
the document route against the same model served as a plain SparseEncoder,
side by side in one run.

The Router folder is splade-tiny (trained, from PyPI) as the document route
and a seeded random weight per vocabulary token as the query route, saved
by sentence-transformers (`Router.for_query_document`, as the tests build
it); the plain folder is splade-tiny as a SparseEncoder. Queries are the
first 2-12 words of each corpus text, documents the corpus texts.
- offline (`LLM.encode(pooling_task="embed")` with
  `PoolingParams(route=...)` + `torch.nonzero` of each `outputs.data`, the
  README's path; engines compiled, fp32):
  queries through each route, documents through the document route and
  the plain folder, and a 50/50 mix of queries (query route) and documents
  (document route); texts/s, best of --rounds;
- served (`vllm serve` of the Router folder, POST /embed_sparse with
  `prompt_name`, one input a request, one client after the other on
  loopback): p50 and p99 latency and requests/s for queries on each route
  and for the 50/50 mix.
Both routes are first checked against sentence-transformers'
`encode_query` / `encode_document` (same non-zero terms, within 1e-6 and
1e-5), or the run stops.

    python -m bench.routes OUT.json [--texts N] [--requests N] [--rounds N]
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
from tests.checkpoints import (ensure_folder, save_inference_free_of,
                               save_sparse_encoder_of)
from tests.utils import SpladeServer

ROUTER = BENCH / "splade-tiny-inference-free"
PLAIN = BENCH / "splade-tiny-sparse-encoder"


def ensure_folders() -> tuple[Path, Path]:
    """splade-tiny as an inference-free Router folder and as a plain
    SparseEncoder folder (made once)."""
    return (ensure_folder(save_inference_free_of, str(TINY), ROUTER),
            ensure_folder(save_sparse_encoder_of, str(TINY), PLAIN))


def make_texts(n: int) -> tuple[list[str], list[str]]:
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    rng = random.Random(0)
    documents = make_corpus(tokenizer, n)
    queries = [" ".join(t.split()[:rng.randint(2, 12)]) for t in documents]
    return queries, documents


def _params(routes):
    from vllm import PoolingParams
    return [PoolingParams(route=r) for r in routes]


def _embed(llm, texts, routes=None) -> list:
    kwargs = {} if routes is None else {"pooling_params": _params(routes)}
    outputs = llm.encode(texts, pooling_task="embed", use_tqdm=False, **kwargs)
    # The README's path: each vector's non-zero terms.
    return [torch.nonzero(o.outputs.data) for o in outputs]


def check(llm, queries: list[str]) -> dict:
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(str(ROUTER), device="cpu")
    worst = {}
    for route, encode, atol in (("query", encoder.encode_query, 1e-6),
                                ("document", encoder.encode_document, 1e-5)):
        want = encode(queries, convert_to_tensor=True).to_dense().float()
        got = torch.tensor([
            o.outputs.embedding for o in llm.embed(
                queries, pooling_params=_params([route] * len(queries)),
                use_tqdm=False)
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


def offline(queries: list[str], documents: list[str], rounds: int) -> dict:
    from vllm import LLM
    result: dict = {}
    n = len(queries)
    half = n // 2
    mixed = queries[:half] + documents[half:]
    mixed_routes = ["query"] * half + ["document"] * (n - half)
    order = list(range(n))
    random.Random(1).shuffle(order)  # interleaved, as traffic arrives
    mixed = [mixed[i] for i in order]
    mixed_routes = [mixed_routes[i] for i in order]
    cases = {
        "query route, queries": (queries, ["query"] * n),
        "document route, queries": (queries, ["document"] * n),
        "document route, documents": (documents, ["document"] * n),
        "50/50 mix": (mixed, mixed_routes),
    }
    llm = LLM(model=str(ROUTER), dtype="float32", max_model_len=512)
    result["check_max_diff"] = check(llm, queries[:32])
    for name, (texts, routes) in cases.items():
        s = _best(lambda: _embed(llm, texts, routes), rounds)
        result[name] = {"s": s, "texts_per_s": n / s}
        print(f"bench: offline {name:28s} {n / s:9.1f} texts/s ({s:.3f} s)",
              flush=True)
    del llm
    gc.collect()
    llm = LLM(model=str(PLAIN), dtype="float32", max_model_len=512)
    s = _best(lambda: _embed(llm, documents), rounds)
    result["plain SparseEncoder, documents"] = {"s": s, "texts_per_s": n / s}
    print(f"bench: offline {'plain SparseEncoder, documents':28s} "
          f"{n / s:9.1f} texts/s ({s:.3f} s)",
          flush=True)
    del llm
    gc.collect()
    return result


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
        "ms_p50": 1000 * statistics.median(times),
        "ms_p99": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))],
        "requests_per_s": len(times) / wall,
    }


def served(queries: list[str], documents: list[str]) -> dict:
    n = len(queries)
    mixed = [{
        "inputs": q if i % 2 == 0 else d,
        "prompt_name": "query" if i % 2 == 0 else "document"
    } for i, (q, d) in enumerate(zip(queries, documents))]
    cases = {
        "query route, queries": [{
            "inputs": q,
            "prompt_name": "query"
        } for q in queries],
        "document route, queries": [{
            "inputs": q,
            "prompt_name": "document"
        } for q in queries],
        "50/50 mix": mixed,
    }
    result = {}
    with SpladeServer(str(ROUTER), hf_overrides=None) as server:
        for name, bodies in cases.items():
            result[name] = _latencies(server, bodies)
            r = result[name]
            print(f"bench: served  {name:28s} {r['requests_per_s']:9.1f} "
                  f"requests/s, p50 {r['ms_p50']:.1f} ms, "
                  f"p99 {r['ms_p99']:.1f} ms ({n} requests)",
                  flush=True)
    return result


def main(out_path: str, num_texts: int, num_requests: int,
         rounds: int) -> None:
    ensure_folders()
    queries, documents = make_texts(num_texts)
    result = {
        "texts": num_texts,
        "requests": num_requests,
        "rounds": rounds,
        "model": "splade-tiny",
        "query_words": [2, 12],
    }
    result["offline"] = offline(queries, documents, rounds)
    result["served"] = served(queries[:num_requests],
                              documents[:num_requests])
    off, srv = result["offline"], result["served"]
    result["ratios"] = {
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
    for name, ratio in result["ratios"].items():
        print(f"bench: {name}: {ratio:.2f}x", flush=True)
    Path(out_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    main(args.out, args.texts, args.requests, args.rounds)
