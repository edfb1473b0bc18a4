# SPDX-License-Identifier: Apache-2.0
"""The two vLLM servers, as a search application calls them: SPLADE through
TEI's `/embed_sparse`, the dense model through OpenAI's `/v1/embeddings`."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
import requests
import scipy.sparse as sp

BATCH = 32  # TEI's default --max-client-batch-size, which /embed_sparse keeps
_local = threading.local()


def _session() -> requests.Session:
    if not hasattr(_local, "session"):
        _local.session = requests.Session()
    return _local.session


def _post(url: str, body: dict) -> object:
    r = _session().post(url, json=body, timeout=300)
    if r.status_code != 200:
        raise RuntimeError(f"POST {url}: {r.status_code} {r.text[:300]}")
    return r.json()


def embed_sparse(base: str, texts: list[str]) -> list[dict[int, float]]:
    """One request: each text's SPLADE terms as {vocabulary id: weight}.
    `truncate` cuts texts at the model's length, as sentence-transformers
    does, instead of a 413."""
    rows = _post(f"{base}/embed_sparse", {"inputs": texts, "truncate": True})
    if len(rows) != len(texts):
        raise RuntimeError(f"/embed_sparse: {len(rows)} rows for "
                           f"{len(texts)} texts")
    return [{t["index"]: t["value"] for t in row} for row in rows]


def embed_dense(base: str, texts: list[str], model: str) -> np.ndarray:
    """One request: each text's dense vector (unit length: the model's
    folder ends with Normalize). `truncate_prompt_tokens: -1` cuts at the
    model's length, as sentence-transformers does."""
    body = _post(f"{base}/v1/embeddings", {
        "model": model,
        "input": texts,
        "truncate_prompt_tokens": -1
    })
    data = sorted(body["data"], key=lambda d: d["index"])
    if [d["index"] for d in data] != list(range(len(texts))):
        raise RuntimeError(f"/v1/embeddings: indices "
                           f"{[d['index'] for d in data]} for {len(texts)} "
                           "texts")
    return np.array([d["embedding"] for d in data], dtype=np.float32)


def encode_all(embed: Callable[[list[str]], list],
               texts: list[str],
               concurrency: int = 4,
               progress: str = "") -> tuple[list, float]:
    """Every text through `embed`, BATCH texts a request, `concurrency`
    requests in flight (the server batches them); in order. Returns the
    vectors and the seconds taken."""
    batches = [texts[i:i + BATCH] for i in range(0, len(texts), BATCH)]
    out: list = []
    start = time.perf_counter()
    shown = 0
    with ThreadPoolExecutor(concurrency) as pool:
        for part in pool.map(embed, batches):
            out.extend(part)
            done = len(out) * 10 // max(len(texts), 1)
            if progress and done > shown:
                shown = done
                print(f"{progress}: {len(out)}/{len(texts)} "
                      f"({time.perf_counter() - start:.0f} s)", flush=True)
    return out, time.perf_counter() - start


def max_model_len(base: str) -> int:
    """The served model's length limit, as vLLM reports it."""
    r = _session().get(f"{base}/v1/models", timeout=30)
    r.raise_for_status()
    return int(r.json()["data"][0]["max_model_len"])


def to_csr(rows: list[dict[int, float]], dim: int) -> sp.csr_matrix:
    """Sparse vectors as one CSR matrix (for exact scoring); every id must
    be below `dim`."""
    top = max((max(r) for r in rows if r), default=-1)
    if top >= dim:
        raise RuntimeError(f"term id {top} outside the vocabulary ({dim})")
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = np.fromiter((k for r in rows for k in sorted(r)),
                          dtype=np.int64, count=int(indptr[-1]))
    data = np.fromiter((r[k] for r in rows for k in sorted(r)),
                       dtype=np.float32, count=int(indptr[-1]))
    return sp.csr_matrix((data, indices, indptr), shape=(len(rows), dim))
