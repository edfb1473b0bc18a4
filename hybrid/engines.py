# SPDX-License-Identifier: Apache-2.0
"""The search engines the vectors go into: Milvus Lite (sparse and dense in
one collection, fused by Milvus), Seismic (learned-sparse), bm25s (lexical
baseline), and exact scoring (the reference for the ANN indexes)."""
import shutil
from pathlib import Path

import numpy as np
import scipy.sparse as sp

K = 100  # every method returns its top 100 (Recall@100)
RRF_K = 60  # Milvus's default, and the usual constant of RRF
WEIGHTS = (0.5, 0.5)  # sparse, dense: fixed, not tuned on the queries


def folder_bytes(path: Path) -> int:
    if not path.exists():
        raise FileNotFoundError(path)
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Milvus:
    """A Milvus Lite collection: id, a SPARSE_FLOAT_VECTOR with an inverted
    index (inner product) and a FLOAT_VECTOR (inner product of unit
    vectors: cosine), searched alone or with `hybrid_search`."""

    def __init__(self, path: Path, dim: int, collection: str = "docs"):
        from pymilvus import DataType, MilvusClient
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            path.unlink()
        self.path = path
        self.name = collection
        self.client = MilvusClient(str(path))
        schema = self.client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
        index = self.client.prepare_index_params()
        index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX",
                        metric_type="IP")
        index.add_index("dense", index_type="FLAT", metric_type="IP")
        self.client.create_collection(collection, schema=schema,
                                      index_params=index)

    def insert(self, ids: list[int], sparse: list[dict[int, float]],
               dense: np.ndarray, batch: int = 1000) -> None:
        for i in range(0, len(ids), batch):
            self.client.insert(self.name, [{
                "id": ids[j], "sparse": sparse[j], "dense": dense[j].tolist()
            } for j in range(i, min(i + batch, len(ids)))])
        self.client.flush(self.name)

    def search_scored(self, field: str, query, k: int = K) -> list[tuple]:
        """(id, inner product) of the top k on one field."""
        if isinstance(query, np.ndarray):
            query = query.tolist()
        hits = self.client.search(self.name, [query], anns_field=field,
                                  limit=k, search_params={"metric_type": "IP"})
        return [(h["id"], h["distance"]) for h in hits[0]]

    def search(self, field: str, query, k: int = K) -> list[int]:
        return [doc for doc, _ in self.search_scored(field, query, k)]

    def search_hybrid(self, sparse: dict[int, float], dense: np.ndarray,
                      fusion: str, k: int = K) -> list[int]:
        from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker
        requests = [
            AnnSearchRequest([sparse], "sparse", {"metric_type": "IP"}, k),
            AnnSearchRequest([dense.tolist()], "dense", {"metric_type": "IP"},
                             k),
        ]
        ranker = (RRFRanker(RRF_K) if fusion == "rrf" else
                  WeightedRanker(*WEIGHTS))
        hits = self.client.hybrid_search(self.name, requests, ranker, limit=k)
        return [h["id"] for h in hits[0]]

    def size(self) -> int:
        return folder_bytes(self.path)

    def close(self) -> None:
        self.client.close()


def fuse_min_max(lists: list[list[tuple]], weights: tuple[float, ...],
                 k: int = K) -> list[int]:
    """Weighted sum of each list's min-max normalised scores, a document
    missing from a list counting 0 there (OpenSearch's default hybrid
    normalisation: min_max + arithmetic_mean)."""
    fused: dict[int, float] = {}
    for hits, w in zip(lists, weights):
        if not hits:
            continue
        scores = [s for _, s in hits]
        lo, span = min(scores), max(scores) - min(scores)
        for doc, s in hits:
            norm = (s - lo) / span if span > 0 else 1.0
            fused[doc] = fused.get(doc, 0.0) + w * norm
    return sorted(fused, key=lambda d: (-fused[d], d))[:k]


class Seismic:
    """A Seismic index of the SPLADE vectors (vocabulary ids as components)."""

    QUERY_CUT = 20  # query terms scanned
    HEAP_FACTOR = 0.7

    def __init__(self, docs: sp.csr_matrix, path: Path):
        import seismic
        self.string = seismic.get_seismic_string()
        dataset = seismic.SeismicDataset(dim=docs.shape[1])
        dataset.add_documents_by_id(
            [str(i) for i in range(docs.shape[0])],
            docs.indices.astype(np.int64), docs.data.astype(np.float32),
            docs.indptr.astype(np.int64))
        self.index = seismic.SeismicIndex.build_from_dataset(dataset)
        self.index.save(str(path))
        self.path = Path(str(path) + ".index.seismic")

    def search(self, query: dict[int, float], k: int = K) -> list[int]:
        terms = sorted(query)
        hits = self.index.search(
            "q", np.array([str(t) for t in terms], dtype=self.string),
            np.array([query[t] for t in terms], dtype=np.float32), k,
            self.QUERY_CUT, self.HEAP_FACTOR)
        return [int(doc) for _, _, doc in hits]

    def size(self) -> int:
        return folder_bytes(self.path)


class BM25:
    """bm25s over the same document texts (English stopwords, no stemmer)."""

    def __init__(self, texts: list[str], path: Path):
        import bm25s
        self.bm25s = bm25s
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize(texts, stopwords="en",
                                            show_progress=False),
                             show_progress=False)
        self.n = len(texts)
        shutil.rmtree(path, ignore_errors=True)
        self.retriever.save(str(path))
        self.path = path

    def search(self, query: str, k: int = K) -> list[int]:
        tokens = self.bm25s.tokenize([query], stopwords="en",
                                     show_progress=False)
        docs, _ = self.retriever.retrieve(tokens, k=min(k, self.n),
                                          show_progress=False, n_threads=1)
        return [int(d) for d in docs[0]]

    def size(self) -> int:
        return folder_bytes(self.path)


def exact_top(queries: sp.csr_matrix, docs: sp.csr_matrix,
              k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product top-k of every query: ids and the score matrix
    (dense [queries, docs]; fine at this corpus size)."""
    scores = (queries @ docs.T).toarray()
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return top, scores
