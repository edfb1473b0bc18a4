# SPDX-License-Identifier: Apache-2.0
"""POST /embed_sparse: TEI's request and response, checked against
sentence-transformers, the top_k and return_tokens extras, truncation,
prompts, and TEI's errors. The route is the vllm-splade endpoint plugin's
(tests.utils.SpladeServer enables it)."""
import json

import pytest
import torch

from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer

pytestmark = pytest.mark.usefixtures("embed_sparse")


def as_dense(terms: list[dict], size: int = 30522) -> torch.Tensor:
    vector = torch.zeros(size)
    for term in terms:
        vector[term["index"]] = term["value"]
    return vector


def offline_terms(vector: torch.Tensor) -> dict[int, float]:
    """The documented one-liner for offline users (docs/usage.md)."""
    return {i: w for i, w in enumerate(vector.tolist()) if w}


def test_tei_response_equals_sentence_transformers(splade_server, splade_st):
    """The terms of every parity text against sentence-transformers'
    SparseEncoder, the reference, not another endpoint of this server."""
    want = splade_st.encode(PARITY_TEXTS, convert_to_tensor=True)
    want = want.to_dense().float()
    got = [
        terms for i in range(0, len(PARITY_TEXTS), 32)
        for terms in splade_server.post("/embed_sparse",
                                        {"inputs": PARITY_TEXTS[i:i + 32]})
    ]
    for text, terms, vector in zip(PARITY_TEXTS, got, want, strict=True):
        assert [t["index"] for t in terms] == vector.nonzero().squeeze(
            1).tolist(), text
        torch.testing.assert_close(as_dense(terms), vector, rtol=0, atol=1e-5)


def test_tei_response_equals_offline(splade_server, offline_vectors):
    # In requests of 32 texts, the most TEI's default allows.
    body = [
        terms for i in range(0, len(PARITY_TEXTS), 32)
        for terms in splade_server.post("/embed_sparse",
                                        {"inputs": PARITY_TEXTS[i:i + 32]})
    ]
    assert len(body) == len(PARITY_TEXTS)
    for text, terms in zip(PARITY_TEXTS, body):
        indices = [t["index"] for t in terms]
        assert indices == sorted(indices), "ascending index"
        assert all(set(t) == {"index", "value"} for t in terms)
        assert all(t["value"] > 0 for t in terms), "non-zeros only"
        want = offline_terms(offline_vectors[text])
        assert indices == list(want), text
        torch.testing.assert_close(torch.tensor([t["value"] for t in terms]),
                                   torch.tensor(list(want.values())),
                                   rtol=0,
                                   atol=1e-5)
    # A single string gives a list of one.
    (one, ) = splade_server.post("/embed_sparse", {"inputs": PARITY_TEXTS[6]})
    assert [t["index"] for t in one] == [t["index"] for t in body[6]]
    torch.testing.assert_close(as_dense(one), as_dense(body[6]),
                               rtol=0,
                               atol=1e-5)


def test_top_k_and_return_tokens(splade_server, splade_llm, offline_vectors):
    text = "what causes aging fast"
    (terms, ) = splade_server.post("/embed_sparse", {
        "inputs": [text],
        "top_k": 5,
        "return_tokens": True
    })
    want = offline_terms(offline_vectors[text])
    top5 = sorted(sorted(want, key=want.get, reverse=True)[:5])
    assert [t["index"] for t in terms] == top5
    tokenizer = splade_llm.get_tokenizer()
    assert [t["token"] for t in terms
            ] == tokenizer.convert_ids_to_tokens(top5)
    assert "fast" in [t["token"] for t in terms]
    # Larger than the number of terms: all of them.
    (everything, ) = splade_server.post("/embed_sparse", {
        "inputs": text,
        "top_k": 10**12
    })
    assert [t["index"] for t in everything] == list(want)


@pytest.mark.parametrize("direction", ["right", "left", "Right", "Left"])
def test_truncation_keeps_special_tokens(splade_server, splade_st, direction):
    """Truncation on either side keeps [CLS] and [SEP], as TEI does: the
    same vector as sentence-transformers with a tokenizer truncating on
    that side."""
    text = " ".join(f"word{i}" for i in range(700))
    tokenizer = splade_st.tokenizer
    saved, tokenizer.truncation_side = (tokenizer.truncation_side,
                                        direction.lower())
    try:
        want = splade_st.encode([text], convert_to_tensor=True)
    finally:
        tokenizer.truncation_side = saved
    (terms, ) = splade_server.post("/embed_sparse", {
        "inputs": text,
        "truncate": True,
        "truncation_direction": direction
    })
    torch.testing.assert_close(as_dense(terms),
                               want.to_dense()[0].float(),
                               rtol=0,
                               atol=1e-5)


def test_token_ids_equal_sentence_transformers(splade_server, splade_st):
    """TEI's token-id inputs: a text's ids (special tokens included) give
    sentence-transformers' vector of the text."""
    texts = PARITY_TEXTS[:8]
    ids = [splade_st.tokenizer(t)["input_ids"] for t in texts]
    want = splade_st.encode(texts, convert_to_tensor=True).to_dense().float()
    got = splade_server.post("/embed_sparse", {"inputs": ids})
    got += splade_server.post("/embed_sparse", {"inputs": ids[0]})
    for terms, vector in zip(got, [*want, want[0]], strict=True):
        torch.testing.assert_close(as_dense(terms), vector, rtol=0, atol=1e-5)


# TEI's status and error_type per kind (router/src/http/server.rs).
@pytest.mark.parametrize("body,status,error_type,message", [
    ({"inputs": []}, 400, "Empty", "cannot be empty"),
    ({"inputs": ""}, 400, "Empty", "cannot be empty"),
    ({"inputs": "word " * 600, "truncate": False}, 422, "Validation",
     "maximum context length is 512"),
    ({"inputs": ["ok", "word " * 600], "truncate": False}, 422, "Validation",
     "maximum context length is 512"),
    ({"inputs": ["a"] * 33}, 422, "Validation",
     "batch size 33 > maximum allowed batch size 32"),
    ({"inputs": [40000]}, 422, "Validation", "out of vocabulary"),
    ({"inputs": "a", "prompt_name": "query"}, 422, "Validation",
     "no prompts were found"),
    ({"inputs": "a", "top_k": 0}, 422, "Validation",
     "greater than or equal to 1"),
    ({"inputs": [[1], 2]}, 422, "Validation", "inputs: expected a string"),
    ({"truncate": True}, 422, "Validation", "Field required"),
])
def test_errors_are_tei_s(splade_server, body, status, error_type, message):
    got, data = splade_server.request("/embed_sparse", body)
    assert got == status, data
    error = json.loads(data)
    assert error["error_type"] == error_type and message in error["error"]


def test_use_activation_on_embeddings(splade_server, offline_vectors):
    """`use_activation` is the dense models' normalisation: true is refused
    with a 400 that says why, false gives the unnormalised SPLADE vector.
    The seed's `"normalize": false` gets 0.34's pointer to it."""
    def embed(**extra):
        return splade_server.request("/v1/embeddings", {
            "model": splade_server.model,
            "input": PARITY_TEXTS[0],
            **extra
        })

    status, data = embed(use_activation=True)
    assert status == 400 and b"never normalized" in data, data
    status, data = embed(normalize=False)
    assert status == 400 and b"use `use_activation`" in data, data
    status, data = embed(use_activation=False)
    assert status == 200, data
    got = torch.tensor(json.loads(data)["data"][0]["embedding"])
    torch.testing.assert_close(got, offline_vectors[PARITY_TEXTS[0]],
                               rtol=0, atol=1e-5)


@pytest.fixture(scope="module")
def prompt_folder(tmp_path_factory, splade_tiny):
    """splade-tiny saved by sentence-transformers as a SparseEncoder with
    query/document prompts and a tokenizer that truncates on the left."""
    from sentence_transformers import SparseEncoder
    model = SparseEncoder(splade_tiny, device="cpu")
    model.prompts = {"query": "query: ", "document": "passage: "}
    model.tokenizer.truncation_side = "left"
    path = tmp_path_factory.mktemp("splade-prompts")
    model.save(str(path))
    return str(path), SparseEncoder(str(path), device="cpu")


@pytest.fixture(scope="module")
def prompt_server(prompt_folder):
    with SpladeServer(prompt_folder[0], hf_overrides=None) as server:
        yield server


def test_prompt_name_and_tokenizer_side(prompt_folder, prompt_server):
    """TEI's `prompt_name` is a prompt of the folder's sentence-transformers
    config, as sentence-transformers applies it (token ids too: decoded and
    encoded again with the prompt, as TEI does); either truncation side
    keeps the special tokens whatever side the tokenizer truncates on."""
    _, st = prompt_folder
    texts = PARITY_TEXTS[:4]
    want = st.encode(texts, prompt_name="query",
                     convert_to_tensor=True).to_dense().float()
    got = prompt_server.post("/embed_sparse", {
        "inputs": texts,
        "prompt_name": "query"
    })
    for terms, vector in zip(got, want, strict=True):
        torch.testing.assert_close(as_dense(terms), vector, rtol=0, atol=1e-5)
    ids = st.tokenizer(texts[0])["input_ids"]
    (from_ids, ) = prompt_server.post("/embed_sparse", {
        "inputs": ids,
        "prompt_name": "query"
    })
    torch.testing.assert_close(as_dense(from_ids), want[0], rtol=0, atol=1e-5)

    status, data = prompt_server.request("/embed_sparse", {
        "inputs": "a",
        "prompt_name": "passage"
    })
    assert status == 422, data
    assert 'Available prompts: ["document", "query"]' in json.loads(
        data)["error"]

    text = " ".join(f"word{i}" for i in range(700))
    for side in ("Right", "Left"):
        st.tokenizer.truncation_side = side.lower()
        want = st.encode([text], convert_to_tensor=True).to_dense().float()
        st.tokenizer.truncation_side = "left"
        (terms, ) = prompt_server.post("/embed_sparse", {
            "inputs": text,
            "truncate": True,
            "truncation_direction": side
        })
        torch.testing.assert_close(as_dense(terms), want[0], rtol=0,
                                   atol=1e-5)


def test_dense_model_has_no_embed_sparse(tmp_path):
    """/embed_sparse serves only a model that produces sparse vectors: a
    dense server answers as TEI 1.9 answers a model without SPLADE pooling
    (424, Backend)."""
    from tests.models.language.pooling.test_splade_parity import (
        _save_synthetic_bert)
    _save_synthetic_bert(tmp_path, masked_lm=False)
    with SpladeServer(str(tmp_path), hf_overrides=None) as dense:
        status, data = dense.request("/embed_sparse", {"inputs": "hello"})
        assert status == 424, data
        assert json.loads(data) == {
            "error": "Model is not an embedding model with SPLADE pooling",
            "error_type": "Backend"
        }
        # Its dense embeddings still work.
        assert dense.post("/v1/embeddings", {
            "model": dense.model,
            "input": "hello"
        })["data"][0]["embedding"]


def test_offline_one_liner_with_tokens(splade_llm, splade_server):
    """docs/usage.md: LLM.embed output to index/value and token/weight."""
    (out, ) = splade_llm.embed(["what causes aging fast"])
    terms = {i: w for i, w in enumerate(out.outputs.embedding) if w}
    tokens = dict(
        zip(splade_llm.get_tokenizer().convert_ids_to_tokens(list(terms)),
            terms.values()))
    (served, ) = splade_server.post("/embed_sparse", {
        "inputs": "what causes aging fast",
        "return_tokens": True
    })
    assert list(terms) == [t["index"] for t in served]
    assert list(tokens) == [t["token"] for t in served]


def test_top_k_is_max_active_dims_and_threshold_prunes(splade_server,
                                                       splade_st,
                                                       offline_vectors):
    """top_k keeps the terms sentence-transformers' max_active_dims keeps;
    threshold drops the terms below it, before or after top_k alike."""
    for text in PARITY_TEXTS[:10]:
        (st_top, ) = splade_st.encode([text],
                                      max_active_dims=8,
                                      convert_to_tensor=True)
        st_top = st_top.to_dense().float()
        (terms, ) = splade_server.post("/embed_sparse", {
            "inputs": text,
            "top_k": 8
        })
        assert [t["index"] for t in terms] == st_top.nonzero().squeeze(
            1).tolist(), text
        torch.testing.assert_close(as_dense(terms), st_top, rtol=0, atol=1e-5)

        want = offline_terms(offline_vectors[text])
        # Midway in the widest gap between two weights, so that a 1e-6
        # difference from the offline vector cannot cross it.
        weights = sorted(want.values())
        _, k = max((b - a, k) for k, (a, b) in enumerate(
            zip(weights, weights[1:])))
        threshold = (weights[k] + weights[k + 1]) / 2
        (pruned, ) = splade_server.post("/embed_sparse", {
            "inputs": text,
            "threshold": threshold
        })
        assert [t["index"] for t in pruned
                ] == [i for i, w in want.items() if w >= threshold], text


@pytest.mark.parametrize("build", ["splade_server", "stock_splade_server"])
def test_api_key_locks_every_route_it_locks_on_v1(build, request):
    """`vllm serve --api-key` on the patched build and on stock vLLM + the
    plugin: /embed_sparse is locked as vLLM locks /v1/embeddings (vLLM's
    middleware guards only /v1, /v2, /inference, /cohere; the plugin checks
    its own route), with TEI's error body; /health stays open, as in TEI
    and vLLM."""
    server = request.getfixturevalue(build)
    assert server.api_key
    bodies = {
        "/embed_sparse": {"inputs": "what causes aging fast"},
        "/v1/embeddings": {"model": server.model, "input": "what causes aging"},
    }
    for path, body in bodies.items():
        for key in (None, "wrong-key", "Bearer " + server.api_key):
            status, data = server.request(path, body, api_key=key)
            assert status == 401, (path, key, status, data[:300])
        status, data = server.request(path, body)  # the server's key
        assert status == 200, (path, status, data[:300])
    status, data = server.request("/embed_sparse", bodies["/embed_sparse"],
                                  api_key=None)
    assert json.loads(data) == {"error": "Unauthorized",
                                "error_type": "Unauthorized"}
    assert server.health() == 200
    # What vLLM 0.34 itself leaves open, as docs/usage.md says.
    for path in ("/tokenize", "/pooling"):
        status, data = server.request(path, bodies["/v1/embeddings"] | {
            "prompt": "what causes aging"}, api_key=None)
        assert status == 200, (path, status, data[:300])
