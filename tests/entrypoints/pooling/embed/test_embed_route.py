# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""An inference-free sparse encoder (a sentence-transformers Router) served:
every entry point picks a route by name and gives sentence-transformers'
encode_query / encode_document vectors."""

import json
import os

import numpy as np
import pytest
import requests

from tests.models.language.pooling.test_splade import save_random_splade
from tests.models.language.pooling.test_splade_router import save_router_encoder
from tests.utils import RemoteOpenAIServer

TEXTS = [
    "what causes aging fast",
    "The capital of France is Paris.",
]
PROMPTS = {"query": "query: ", "document": "passage: "}


@pytest.fixture(scope="module")
def router_folder(tmp_path_factory) -> str:
    backbone = str(tmp_path_factory.mktemp("backbone"))
    save_random_splade(backbone)
    path = str(tmp_path_factory.mktemp("router"))
    save_router_encoder(path, backbone, prompts=PROMPTS)
    return path


@pytest.fixture(scope="module")
def server(router_folder):
    # No flags: the folder says what it is. Compiled, as production runs.
    args = ["--dtype", "float32", "--max-model-len", "128"]
    with RemoteOpenAIServer(router_folder, args) as remote_server:
        yield remote_server


@pytest.fixture(scope="module")
def reference(router_folder) -> dict[str, np.ndarray]:
    """sentence-transformers' vectors: encode_query and encode_document apply
    the folder's prompt of their route; `plain_*` are the routes without it."""
    from sentence_transformers import SparseEncoder

    encoder = SparseEncoder(router_folder, device="cpu")
    config = os.path.join(router_folder, "document_0_MLMTransformer", "config.json")
    with open(config) as f:
        vocab_size = json.load(f)["vocab_size"]

    def dense(vectors):
        # The query route's vectors have the tokenizer's size, vLLM's the
        # model's vocabulary: the ids past the tokenizer's weigh nothing.
        vectors = vectors.to_dense().float().numpy()
        return np.pad(vectors, ((0, 0), (0, vocab_size - vectors.shape[1])))

    return {
        "query": dense(encoder.encode_query(TEXTS, convert_to_tensor=True)),
        "document": dense(encoder.encode_document(TEXTS, convert_to_tensor=True)),
        "plain_query": dense(
            encoder.encode(TEXTS, task="query", convert_to_tensor=True)
        ),
        "plain_document": dense(
            encoder.encode(TEXTS, task="document", convert_to_tensor=True)
        ),
    }


def _assert_close(route: str, got: np.ndarray, want: np.ndarray) -> None:
    # A query weight is the table's, exactly; a document one is computed.
    atol = 1e-6 if "query" in route else 1e-5
    np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    assert ((got > atol) <= (want > 0)).all() and ((want > atol) <= (got > 0)).all()


@pytest.mark.parametrize("route", ["query", "document"])
def test_every_entry_point_takes_the_route(
    route: str, server: RemoteOpenAIServer, reference
):
    # Cohere's input_type names the route (and its prompt).
    cohere = requests.post(
        server.url_for("v2/embed"),
        json={"texts": TEXTS, "input_type": route, "embedding_types": ["float"]},
    )
    cohere.raise_for_status()
    for vector, want in zip(cohere.json()["embeddings"]["float"], reference[route]):
        _assert_close(route, np.array(vector), want)

    # The route alone is the module chain; the prompt is text, as in
    # sentence-transformers' encode(task=...).
    prompted = [PROMPTS[route] + t for t in TEXTS]
    for inputs, key in ((TEXTS, f"plain_{route}"), (prompted, route)):
        embeddings = requests.post(
            server.url_for("v1/embeddings"),
            json={"input": inputs, "route": route},
        )
        embeddings.raise_for_status()
        pooling = requests.post(
            server.url_for("pooling"),
            json={
                "input": inputs,
                "task": "embed",
                "route": route,
            },
        )
        pooling.raise_for_status()
        for i, want in enumerate(reference[key]):
            _assert_close(
                route, np.array(embeddings.json()["data"][i]["embedding"]), want
            )
            _assert_close(route, np.array(pooling.json()["data"][i]["data"]), want)


def test_default_route(server: RemoteOpenAIServer, reference):
    """Without a route: the folder's default route (document) everywhere."""
    embeddings = requests.post(
        server.url_for("v1/embeddings"),
        json={"input": TEXTS},
    )
    embeddings.raise_for_status()
    for i, want in enumerate(reference["plain_document"]):
        _assert_close(
            "document", np.array(embeddings.json()["data"][i]["embedding"]), want
        )


def test_bad_routes_are_refused(server: RemoteOpenAIServer):
    for endpoint, extra in (("v1/embeddings", {}), ("pooling", {"task": "embed"})):
        body = {"input": TEXTS, "route": "passage"}
        response = requests.post(server.url_for(endpoint), json={**body, **extra})
        assert response.status_code == 400, response.text
        assert "'passage'" in response.text and "query" in response.text
    response = requests.post(
        server.url_for("pooling"),
        json={
            "input": TEXTS,
            "task": "token_embed",
            "route": "query",
        },
    )
    assert response.status_code == 400, response.text


def test_cohere_input_type_names_a_route_without_prompts():
    """A Router folder need not define prompts: Cohere's `input_type` still
    picks the route it names, and any other value is refused."""
    from types import SimpleNamespace

    from vllm.entrypoints.pooling.embed.io_processor import EmbedIOProcessor
    from vllm.entrypoints.pooling.embed.protocol import CohereEmbedRequest

    processor = object.__new__(EmbedIOProcessor)
    processor.model_config = SimpleNamespace(
        hf_config=SimpleNamespace(sparse_router={"routes": ["query", "document"]})
    )
    processor.task_instructions = None
    processor._validate_input_type("query")
    request = CohereEmbedRequest(model="m", texts=["a"], input_type="query")
    assert processor.create_pooling_params(request).route == "query"
    with pytest.raises(ValueError, match="Unsupported input_type 'search_query'"):
        processor._validate_input_type("search_query")
