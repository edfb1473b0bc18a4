# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The TEI-compatible ``/embed_sparse`` endpoint of SPLADE models."""

import json
import os

import numpy as np
import pytest
import requests

from tests.utils import RemoteOpenAIServer
from vllm.tokenizers import get_tokenizer

MODEL_NAME = os.environ.get(
    "VLLM_TEST_SPLADE_MODEL", "naver/splade-cocondenser-ensembledistil"
)
MAX_MODEL_LEN = 512
TEXTS = [
    "what causes aging fast",
    "The capital of France is Paris, a city on the Seine.",
]
# Right truncation keeps the apples, left truncation the bananas.
LONG_TEXT = "apple " * 400 + "banana " * 400


@pytest.fixture(scope="module")
def server():
    args = [
        "--runner",
        "pooling",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--hf-overrides",
        json.dumps({"architectures": ["BertSpladeSparseEmbeddingModel"]}),
    ]
    with RemoteOpenAIServer(MODEL_NAME, args) as remote_server:
        yield remote_server


@pytest.fixture(scope="module")
def tokenizer():
    return get_tokenizer(MODEL_NAME)


def _embed_sparse(server: RemoteOpenAIServer, **body) -> requests.Response:
    return requests.post(server.url_for("embed_sparse"), json=body)


def _dense(server: RemoteOpenAIServer, texts: list[str], **extra) -> np.ndarray:
    response = requests.post(
        server.url_for("v1/embeddings"),
        json={"model": MODEL_NAME, "input": texts, **extra},
    )
    response.raise_for_status()
    data = response.json()["data"]
    return np.array([d["embedding"] for d in data], dtype=np.float32)


def _assert_matches_dense(sparse: list[dict], dense: np.ndarray) -> None:
    indices = [term["index"] for term in sparse]
    assert indices == sorted(indices)
    assert indices == np.flatnonzero(dense).tolist()
    values = np.array([term["value"] for term in sparse], dtype=np.float32)
    # Two requests may be batched differently, so their GEMMs sum in another
    # order: fp32 rounding apart (1.5e-6 seen), the same vector.
    np.testing.assert_allclose(values, dense[indices], rtol=0, atol=1e-5)


def _assert_error(response: requests.Response, *fragments: str) -> str:
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_matches_embeddings(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs=TEXTS)
    response.raise_for_status()
    result = response.json()
    dense = _dense(server, TEXTS)
    assert len(result) == len(TEXTS)
    for sparse, vector in zip(result, dense):
        assert sparse, "SPLADE vector has no active terms"
        assert all(set(term) == {"index", "value"} for term in sparse)
        _assert_matches_dense(sparse, vector)


def test_single_string_and_float32_printing(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs=TEXTS[0])
    response.raise_for_status()
    (sparse,) = response.json()
    _assert_matches_dense(sparse, _dense(server, [TEXTS[0]])[0])
    # TEI prints float32: the shortest decimal that round-trips it.
    numbers = json.loads(response.text, parse_float=str)[0]
    for term in numbers:
        assert term["value"] == str(np.float32(term["value"])), term


def test_top_k(server: RemoteOpenAIServer):
    (full,) = _embed_sparse(server, inputs=TEXTS[0]).json()
    (top,) = _embed_sparse(server, inputs=TEXTS[0], top_k=5).json()
    assert len(top) == 5
    indices = [term["index"] for term in top]
    assert indices == sorted(indices)
    largest = sorted(full, key=lambda term: term["value"], reverse=True)[:5]
    assert sorted(indices) == sorted(term["index"] for term in largest)
    by_index = {term["index"]: term["value"] for term in full}
    assert all(by_index[term["index"]] == term["value"] for term in top)

    (everything,) = _embed_sparse(server, inputs=TEXTS[0], top_k=100_000).json()
    assert everything == full


def test_threshold(server: RemoteOpenAIServer):
    (full,) = _embed_sparse(server, inputs=TEXTS[0]).json()
    values = sorted(term["value"] for term in full)
    threshold = values[len(values) // 2]
    (pruned,) = _embed_sparse(server, inputs=TEXTS[0], threshold=threshold).json()
    assert pruned == [term for term in full if term["value"] >= threshold]
    assert 0 < len(pruned) < len(full)
    # With top_k, both apply; 0 keeps every non-zero term.
    (both,) = _embed_sparse(
        server, inputs=TEXTS[0], threshold=threshold, top_k=2
    ).json()
    assert len(both) == 2 and all(term in pruned for term in both)
    assert _embed_sparse(server, inputs=TEXTS[0], threshold=0).json() == [full]
    (none,) = _embed_sparse(server, inputs=TEXTS[0], threshold=1e9).json()
    assert none == []


def test_return_tokens(server: RemoteOpenAIServer, tokenizer):
    (sparse,) = _embed_sparse(server, inputs=TEXTS[0], return_tokens=True).json()
    indices = [term["index"] for term in sparse]
    tokens = [term["token"] for term in sparse]
    assert tokens == tokenizer.convert_ids_to_tokens(indices)
    assert "aging" in tokens


def test_too_long_without_truncate(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs=["short", LONG_TEXT])
    _assert_error(response, str(MAX_MODEL_LEN), str(MAX_MODEL_LEN + 1))


@pytest.mark.parametrize("direction", ["right", "Right", "left", "Left"])
def test_truncate(server: RemoteOpenAIServer, tokenizer, direction: str):
    response = _embed_sparse(
        server, inputs=LONG_TEXT, truncate=True, truncation_direction=direction
    )
    response.raise_for_status()
    (sparse,) = response.json()
    side = direction.lower()
    extra: dict = {"truncate_prompt_tokens": -1}
    if side == "left":
        extra["truncation_side"] = "left"
    _assert_matches_dense(sparse, _dense(server, [LONG_TEXT], **extra)[0])

    kept, dropped = ("apple", "banana") if side == "right" else ("banana", "apple")
    weights = {term["index"]: term["value"] for term in sparse}
    (kept_id,) = tokenizer.convert_tokens_to_ids([kept])
    (dropped_id,) = tokenizer.convert_tokens_to_ids([dropped])
    assert weights.get(kept_id, 0.0) > weights.get(dropped_id, 0.0)


@pytest.mark.parametrize("inputs", ["", [], ["fine", ""]])
def test_empty_inputs(server: RemoteOpenAIServer, inputs):
    _assert_error(_embed_sparse(server, inputs=inputs), "`inputs` cannot be empty")


@pytest.mark.parametrize(
    "body",
    [
        {"inputs": "x", "unknown": 1},
        {"inputs": "x", "truncation_side": "left"},
        {"inputs": 5},
        {"inputs": [1, 2]},
        {"inputs": "x", "truncate": "yes"},
        {"inputs": "x", "truncation_direction": "middle"},
        {"inputs": "x", "top_k": 0},
        {"inputs": "x", "top_k": -3},
        {"inputs": "x", "top_k": 2.5},
        {"inputs": "x", "return_tokens": 1},
        {"inputs": "x", "threshold": -0.5},
        {"inputs": "x", "threshold": "0.5"},
        {"inputs": "x", "threshold": [1]},
    ],
)
def test_invalid_request(server: RemoteOpenAIServer, body: dict):
    response = requests.post(server.url_for("embed_sparse"), json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == 400


def test_priority_needs_priority_scheduling(server: RemoteOpenAIServer):
    # This server schedules first come, first served: a priority would be
    # silently ignored.
    response = _embed_sparse(server, inputs="x", priority=1)
    _assert_error(response, "--scheduling-policy priority")
    _embed_sparse(server, inputs="x", priority=0).raise_for_status()


def test_prompt_name_refused(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs="x", prompt_name="query")
    _assert_error(response, "not supported")
    response = _embed_sparse(server, inputs="x", prompt_name=None)
    response.raise_for_status()


def test_max_client_batch_size(server: RemoteOpenAIServer):
    # TEI's default cap and answer: 32 inputs pass, 33 are a 422.
    response = _embed_sparse(server, inputs=["word"] * 32)
    response.raise_for_status()
    assert len(response.json()) == 32
    response = _embed_sparse(server, inputs=["word"] * 33)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == 422
    assert error["message"] == "batch size 33 > maximum allowed batch size 32"


def test_invalid_unicode(server: RemoteOpenAIServer):
    # Valid JSON, but a lone surrogate is no text a tokenizer can take.
    response = requests.post(
        server.url_for("embed_sparse"),
        data=b'{"inputs": ["fine", "a \\ud800 b"]}',
        headers={"Content-Type": "application/json"},
    )
    _assert_error(response, "`inputs` must be valid Unicode", "position 2")


def test_body_size_limit(server: RemoteOpenAIServer):
    # TEI's payload limit, 2 MB, holds on this route by default.
    response = _embed_sparse(server, inputs="word " * 420_000, truncate=True)
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == 413


@pytest.fixture(scope="module")
def router(tmp_path_factory) -> str:
    from tests.models.language.pooling.test_splade import save_router_encoder

    path = str(tmp_path_factory.mktemp("router") / "inference-free")
    save_router_encoder(path, MODEL_NAME)
    return path


@pytest.fixture(scope="module")
def router_server(router: str):
    # An inference-free SparseEncoder folder: no flags.
    args = ["--dtype", "float32", "--enforce-eager", "--max-model-len", "512"]
    with RemoteOpenAIServer(router, args) as remote_server:
        yield remote_server


@pytest.mark.parametrize("prompt_name", ["query", "document", None])
def test_router_routes(router_server: RemoteOpenAIServer, router: str, prompt_name):
    """`prompt_name` picks the route as encode_query / encode_document do;
    none is the folder's default route (document)."""
    from sentence_transformers import SparseEncoder

    encoder = SparseEncoder(router, device="cpu")
    encode = {
        "query": encoder.encode_query,
        "document": encoder.encode_document,
        None: encoder.encode,
    }[prompt_name]
    want = encode(TEXTS, convert_to_tensor=True).to_dense().numpy()
    response = _embed_sparse(router_server, inputs=TEXTS, prompt_name=prompt_name)
    response.raise_for_status()
    for sparse, vector in zip(response.json(), want):
        indices = [term["index"] for term in sparse]
        assert indices == np.flatnonzero(vector).tolist()
        values = np.array([term["value"] for term in sparse], dtype=np.float32)
        np.testing.assert_allclose(values, vector[indices], rtol=0, atol=1e-5)
    if prompt_name != "query":
        # The dense endpoints run the model route.
        dense = _dense(router_server, TEXTS, model=router)
        _assert_matches_dense(response.json()[0], dense[0])


def test_router_query_route_extras(router_server: RemoteOpenAIServer, tokenizer):
    response = _embed_sparse(router_server, inputs=TEXTS[0], prompt_name="query")
    (full,) = response.json()
    response = _embed_sparse(
        router_server,
        inputs=TEXTS[0],
        prompt_name="query",
        top_k=2,
        return_tokens=True,
    )
    (top,) = response.json()
    largest = sorted(full, key=lambda term: -term["value"])[:2]
    assert [t["index"] for t in top] == sorted(t["index"] for t in largest)
    assert [t["token"] for t in top] == tokenizer.convert_ids_to_tokens(
        [t["index"] for t in top]
    )


@pytest.mark.parametrize("prompt_name", ["passage", "Query", ""])
def test_router_unknown_route(router_server: RemoteOpenAIServer, prompt_name):
    response = _embed_sparse(router_server, inputs="x", prompt_name=prompt_name)
    _assert_error(response, "is not a route", "'document'", "'query'")
