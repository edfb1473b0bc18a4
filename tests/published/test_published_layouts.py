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


def reference(folder: str, texts: list[str] = TEXTS, **kwargs) -> dict:
    """sentence-transformers' vectors of each route, and of encode()."""
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(folder, device="cpu", **kwargs)
    vectors = {
        "query": encoder.encode_query(texts, convert_to_tensor=True),
        "document": encoder.encode_document(texts, convert_to_tensor=True),
        None: encoder.encode(texts, convert_to_tensor=True),
    }
    return {k: v.to_dense().float().numpy() for k, v in vectors.items()}


def embed_sparse(server: SpladeServer, route,
                 texts: list[str] = TEXTS) -> tuple[int, object]:
    body = {"inputs": texts}
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


def assert_vectors(server: SpladeServer, route, want: np.ndarray,
                   texts: list[str] = TEXTS) -> None:
    import json
    status, data = embed_sparse(server, route, texts)
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


@pytest.fixture(scope="module")
def opensearch_doc_v3_gte(splade_tiny, tmp_path_factory) -> str:
    from tests.checkpoints import (ensure_folder,
                                   save_opensearch_doc_v3_gte_of)
    out = tmp_path_factory.mktemp("published") / "opensearch-doc-v3-gte"
    return str(ensure_folder(save_opensearch_doc_v3_gte_of, splade_tiny, out))


@pytest.fixture(scope="module")
def new_impl_cache(tmp_path_factory) -> str:
    from tests.checkpoints import save_new_impl_hub_cache
    return str(save_new_impl_hub_cache(tmp_path_factory.mktemp("hub")))


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


# A document past BERT's 512 positions (GTE takes 8,192): its tokens go
# through the pooler's vocabulary blocks like any other's.
LONG_DOCUMENT = " ".join(PARITY_TEXTS)  # 2,010 tokens


@pytest.mark.parametrize("build", ["patched", "stock"])
def test_opensearch_doc_v3_gte_layout(build: str, opensearch_doc_v3_gte: str,
                                      new_impl_cache: str):
    """OpenSearch's doc-v3-gte (a Router, GTE's NewForMaskedLM at the root,
    its code named in auto_map): served with no flags on either build (no
    --trust-remote-code: vLLM reads GTE's config itself), both routes and
    the default route give what sentence-transformers gives with
    trust_remote_code=True, for a 2,010-token text too: the document route
    runs it whole, the query route weighs its first 512 tokens, where the
    table's tokenizer stops (the model's context is 8,192). The reference runs a GTE written here from the published
    architecture (tests/published/new_impl/), as the hub's remote code."""
    texts = TEXTS + [LONG_DOCUMENT]
    want = reference(opensearch_doc_v3_gte, texts, trust_remote_code=True,
                     cache_folder=new_impl_cache)
    with served(opensearch_doc_v3_gte, build) as server:
        log = Path(server.log.name).read_text()
        assert "GteNewSpladeSparseEmbeddingModel" in log, server.log.name
        for route in ("query", "document", None):
            assert_vectors(server, route, want[route], texts)


@pytest.fixture(scope="module")
def gte_multilingual(splade_tiny, tmp_path_factory) -> str:
    from tests.checkpoints import ensure_folder, save_gte_multilingual_of
    out = tmp_path_factory.mktemp("published") / "gte-multilingual-base"
    return str(ensure_folder(save_gte_multilingual_of, splade_tiny, out))


def mgte_lexical_weights(folder: str, texts: list[str],
                         cache: str) -> np.ndarray:
    """What pymilvus' MGTEEmbeddingFunction returns as the sparse vectors
    (milvus-model's mgte.py, `_GTEEmbeddidng._encode` and
    `_process_token_weights`): transformers' AutoModelForTokenClassification
    with trust_remote_code=True, relu of each token's logit, the largest
    weight of each token id, the tokenizer's CLS, EOS, pad and unknown
    tokens left out; one text at a time, cut at 8,192 tokens."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer
    kwargs = dict(trust_remote_code=True, cache_dir=cache)
    tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
    model = AutoModelForTokenClassification.from_pretrained(folder, **kwargs)
    unused = {
        tokenizer.cls_token_id, tokenizer.eos_token_id,
        tokenizer.pad_token_id, tokenizer.unk_token_id
    }
    out = np.zeros((len(texts), model.config.vocab_size), dtype=np.float32)
    for row, text in enumerate(texts):
        inputs = tokenizer([text], return_tensors="pt", truncation=True,
                           max_length=8192)
        with torch.no_grad():
            weights = torch.relu(model(**inputs).logits).squeeze(-1)[0]
        for weight, token in zip(weights.tolist(),
                                 inputs["input_ids"][0].tolist()):
            if token not in unused and weight > out[row, token]:
                out[row, token] = weight
    return out


@pytest.mark.parametrize("build", ["patched", "stock"])
def test_gte_multilingual_lexical_weights(build: str, gte_multilingual: str,
                                          new_impl_cache: str):
    """gte-multilingual-base's lexical weights (a dense sentence-transformers
    folder over GTE whose checkpoint holds a one-label token classifier):
    served as `GteNewLexicalEmbeddingModel` with the flag docs/usage.md
    gives, /embed_sparse answers pymilvus' MGTEEmbeddingFunction's sparse
    vectors (relu, max per token id, special tokens left out), a 2,010-token
    text included, on both builds, no --trust-remote-code."""
    texts = TEXTS + [LONG_DOCUMENT]
    want = mgte_lexical_weights(gte_multilingual, texts, new_impl_cache)
    assert (want > 0).any(axis=1).sum() >= len(texts) // 2
    overrides = {"architectures": ["GteNewLexicalEmbeddingModel"]}
    with served(gte_multilingual, build, hf_overrides=overrides) as server:
        assert_vectors(server, None, want, texts)
