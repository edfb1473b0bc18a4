# SPDX-License-Identifier: Apache-2.0
"""Response size and time: /embed_sparse vs dense /v1/embeddings.

The patched server (splade-tiny, .venv's CPU build, loopback, with
--hf-overrides BertSpladeSparseEmbeddingModel) gets the same texts
one request each, through /embed_sparse, /v1/embeddings with JSON floats
and /v1/embeddings with base64. Figures: bytes per response and wall time
per request seen by the client on loopback (server time plus a local
transfer), median and total, after one warm-up request per endpoint; bytes
also for queries (<= 18 tokens) and passages apart, since a SPLADE vector's
size grows with its number of terms while a dense one's does not. An
endpoint the server answers with 404 (/embed_sparse, while the series
does not serve it yet) is skipped with a note; the others still run.

    python -m bench.api OUT.json [--texts N]
"""
import argparse
import json
import statistics
import time
from pathlib import Path

from transformers import AutoTokenizer

from bench.corpus import make_corpus
from bench.models import TINY
from tests.utils import SPLADE_OVERRIDES, SpladeServer

FORMATS = {
    "/embed_sparse": lambda text, model: ("/embed_sparse", {
        "inputs": text
    }),
    "/v1/embeddings (JSON)": lambda text, model: ("/v1/embeddings", {
        "model": model,
        "input": text
    }),
    "/v1/embeddings (base64)": lambda text, model: ("/v1/embeddings", {
        "model": model,
        "input": text,
        "encoding_format": "base64"
    }),
}


def main(out_path: str, num_texts: int) -> None:
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    texts = make_corpus(tokenizer, num_texts)
    is_query = [len(tokenizer(t)["input_ids"]) <= 18 for t in texts]
    result = {"texts": len(texts), "queries": sum(is_query), "formats": {}}
    result["skipped"] = {}
    with SpladeServer(str(TINY), hf_overrides=SPLADE_OVERRIDES) as server:
        for name, make in FORMATS.items():
            status, data = server.request(*make("warm up", server.model))
            if status == 404:
                note = f"the server answers {status}: not served by this build"
                result["skipped"][name] = note
                print(f"{name:26s} skipped: {note}", flush=True)
                continue
            assert status == 200, (status, data[:300])
            sizes, times = [], []
            for text in texts:
                path, body = make(text, server.model)
                start = time.perf_counter()
                status, data = server.request(path, body)
                times.append(time.perf_counter() - start)
                assert status == 200, data[:300]
                sizes.append(len(data))
            result["formats"][name] = {
                "bytes_median": statistics.median(sizes),
                "bytes_query_median": statistics.median(
                    b for b, q in zip(sizes, is_query) if q),
                "bytes_passage_median": statistics.median(
                    b for b, q in zip(sizes, is_query) if not q),
                "bytes_total": sum(sizes),
                "ms_median": 1000 * statistics.median(times),
                "s_total": sum(times),
            }
            print(f"{name:26s} {statistics.median(sizes):>9.0f} B/response "
                  f"{1000 * statistics.median(times):7.1f} ms/request "
                  f"{sum(times):6.1f} s total", flush=True)
    Path(out_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--texts", type=int, default=1000)
    args = parser.parse_args()
    main(args.out, args.texts)
