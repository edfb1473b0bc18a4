# SPDX-License-Identifier: Apache-2.0
"""Learned-sparse folders as their model pages publish them, started as a
user starts them: `vllm serve FOLDER`, compiled and with kernel warm-up
(no --enforce-eager), on the patched build with no flags and on stock vLLM
+ the vllm-splade plugin with the flags docs/usage.md gives (none for these
layouts). The stand-ins (tests/checkpoints.py) copy each layout's file
names, module keys, type names and configs, on splade-tiny's trained
weights; the reference is sentence-transformers loading the same folder.
fp32, for a 1e-4 parity (vLLM's default dtype is a setting of its own)."""
import os
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer

TEXTS = PARITY_TEXTS[:8] + PARITY_TEXTS[-2:]
ATOL = 1e-4


def build_env(build: str) -> dict[str, str]:
    if build == "patched":
        return {}
    site = os.environ.get("SPLADE_STOCK_SITE",
                          str(ROOT / "build/vllm-base-site"))
    if not os.path.isdir(os.path.join(site, "vllm")):
        pytest.fail(f"{site} has no vLLM: run scripts/build-base-site.sh")
    return {"PYTHONPATH": site}


def served(folder: str, build: str, **kwargs) -> SpladeServer:
    """`vllm serve folder` with vLLM's start-up (compile, warm-up)."""
    return SpladeServer(folder,
                        hf_overrides=kwargs.pop("hf_overrides", None),
                        env=build_env(build),
                        enforce_eager=False,
                        timeout=600.0,
                        **kwargs)


def reference(folder: str) -> dict:
    """sentence-transformers' vectors of each route, and of encode()."""
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(folder, device="cpu")
    vectors = {
        "query": encoder.encode_query(TEXTS, convert_to_tensor=True),
        "document": encoder.encode_document(TEXTS, convert_to_tensor=True),
        None: encoder.encode(TEXTS, convert_to_tensor=True),
    }
    return {k: v.to_dense().float().numpy() for k, v in vectors.items()}


def embed_sparse(server: SpladeServer, route) -> tuple[int, object]:
    body = {"inputs": TEXTS}
    if route is not None:
        body["prompt_name"] = route
    status, data = server.request("/embed_sparse", body)
    return status, data


def dense(rows: list, size: int) -> np.ndarray:
    out = np.zeros((len(rows), size), dtype=np.float32)
    for i, row in enumerate(rows):
        for term in row:
            out[i, term["index"]] = term["value"]
    return out


def assert_vectors(server: SpladeServer, route, want: np.ndarray) -> None:
    import json
    status, data = embed_sparse(server, route)
    assert status == 200, (route, status, data[:500])
    got = dense(json.loads(data), want.shape[1])
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)
    # The same terms, but those within the tolerance of zero.
    assert ((got > ATOL) <= (want > 0)).all()
    assert ((want > ATOL) <= (got > 0)).all()


@pytest.fixture(scope="module")
def opensearch_doc(splade_tiny, tmp_path_factory) -> str:
    from tests.checkpoints import ensure_folder, save_opensearch_doc_of
    out = tmp_path_factory.mktemp("published") / "opensearch-doc"
    return str(ensure_folder(save_opensearch_doc_of, splade_tiny, out))


@pytest.fixture(scope="module")
def naver_efficient_doc(splade_tiny, tmp_path_factory) -> str:
    from tests.checkpoints import (ensure_distilbert_of, ensure_folder,
                                   save_naver_efficient_of)
    root = tmp_path_factory.mktemp("published")
    document = ensure_distilbert_of(splade_tiny, root / "distilbert")

    def save(query: str, out: str) -> str:
        return save_naver_efficient_of(query, str(document), out)

    return str(ensure_folder(save, splade_tiny, root / "naver-doc"))


@pytest.mark.parametrize("build", ["patched", "stock"])
def test_opensearch_doc_layout(build: str, opensearch_doc: str):
    """OpenSearch's inference-free layout (the document model at the root,
    5.x names, idf.json beside it): both routes and the default route give
    sentence-transformers' vectors, with no flags on either build."""
    want = reference(opensearch_doc)
    with served(opensearch_doc, build) as server:
        log = Path(server.log.name).read_text()
        assert "SpladeSparseEmbeddingModel" in log, server.log.name
        for route in ("query", "document", None):
            assert_vectors(server, route, want[route])


@pytest.mark.parametrize("build", ["patched", "stock"])
def test_naver_efficient_pair_serves_the_root_s_route(
        build: str, naver_efficient_doc: str):
    """naver's efficient pair (a query model and a document model, the
    document one at the root): the server runs the document model; a
    request for the query route is refused with a 4xx that names the
    folder running it, never answered with the document model."""
    want = reference(naver_efficient_doc)
    with served(naver_efficient_doc, build) as server:
        for route in ("document", None):
            assert_vectors(server, route, want[route])
        status, data = embed_sparse(server, "query")
        assert 400 <= status < 500, (status, data[:500])
        assert b"query_0_MLMTransformer" in data, data[:500]


def test_naver_query_model_on_a_second_server(naver_efficient_doc: str):
    """The query route's folder, served as docs/usage.md shows (stock vLLM
    + the plugin), gives sentence-transformers' encode_query vectors."""
    want = reference(naver_efficient_doc)["query"]
    query = os.path.join(naver_efficient_doc, "query_0_MLMTransformer")
    overrides = {"architectures": ["BertSpladeSparseEmbeddingModel"]}
    with served(query, "stock", hf_overrides=overrides) as server:
        assert_vectors(server, None, want)
