# SPDX-License-Identifier: Apache-2.0
"""POST /embed_sparse: TEI's request and response, the top_k and
return_tokens extras, truncation, and errors. Every test here skips, with
the reason, while the served build has no such route (404)."""
import json
import urllib.request

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
def test_truncation_keeps_special_tokens(splade_server, splade_llm,
                                         splade_tiny, direction):
    """Right truncation keeps [CLS] and [SEP], as TEI does. Left truncation
    is vLLM's renderer's: the last 512 tokens of the encoded text, so [SEP]
    stays and [CLS] goes (TEI keeps it: a known difference, docs/usage.md)."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(splade_tiny)
    text = " ".join(f"word{i}" for i in range(700))
    if direction.lower() == "right":
        body = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = [tokenizer.cls_token_id, *body[:510], tokenizer.sep_token_id]
    else:
        ids = tokenizer(text)["input_ids"][-512:]
    prompt = {"prompt_token_ids": ids}
    want = torch.tensor(splade_llm.embed([prompt])[0].outputs.embedding)
    (terms, ) = splade_server.post("/embed_sparse", {
        "inputs": text,
        "truncate": True,
        "truncation_direction": direction
    })
    torch.testing.assert_close(as_dense(terms), want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("body,message", [
    ({"inputs": []}, "cannot be empty"),
    ({"inputs": ""}, "cannot be empty"),
    ({"inputs": "word " * 600}, "maximum context length is 512"),
    ({"inputs": ["ok", "word " * 600]}, "maximum context length is 512"),
    ({"inputs": "a", "top_k": 0}, "greater than or equal to 1"),
    ({"inputs": [1, 2]}, "valid string"),
    ({"inputs": "a", "unknown": True}, "Extra inputs are not permitted"),
    ({"inputs": "a", "prompt_name": "query"}, "`prompt_name` is not supported"),
    ({"truncate": True}, "Field required"),
])
def test_bad_requests_are_clear_400s(splade_server, body, message):
    status, data = splade_server.request("/embed_sparse", body)
    assert status == 400, data
    assert message in json.loads(data)["error"]["message"]


def test_dense_model_has_no_embed_sparse(tmp_path):
    """/embed_sparse exists only where the model produces sparse vectors
    (SupportsSparseEmbedding): a dense server answers 404 and its OpenAPI
    schema has no such path."""
    from tests.models.language.pooling.test_splade_parity import (
        _save_synthetic_bert)
    _save_synthetic_bert(tmp_path, masked_lm=False)
    with SpladeServer(str(tmp_path), hf_overrides=None) as dense:
        status, data = dense.request("/embed_sparse", {"inputs": "hello"})
        assert status == 404, data
        with urllib.request.urlopen(dense.url + "/openapi.json") as r:
            paths = json.loads(r.read())["paths"]
        assert "/v1/embeddings" in paths and "/embed_sparse" not in paths
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
