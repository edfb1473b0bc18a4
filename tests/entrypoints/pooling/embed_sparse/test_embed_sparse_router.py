# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""An inference-free sparse encoder (a sentence-transformers Router) served
by the series (Router folders need its patches) with the vllm-splade plugin:
`/embed_sparse` maps TEI's `prompt_name` onto the route, applying the
folder's prompt of that name, as encode_query / encode_document do."""

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


def _dense(sparse: list[dict], size: int) -> np.ndarray:
    vector = np.zeros(size, dtype=np.float32)
    for term in sparse:
        vector[term["index"]] = term["value"]
    return vector


@pytest.mark.parametrize("route", ["query", "document"])
def test_prompt_name_picks_the_route(
    route: str, server: RemoteOpenAIServer, reference
):
    size = reference[route].shape[1]
    tei = requests.post(
        server.url_for("embed_sparse"), json={"inputs": TEXTS, "prompt_name": route}
    )
    tei.raise_for_status()
    for sparse, want in zip(tei.json(), reference[route]):
        _assert_close(route, _dense(sparse, size), want)


def test_default_route(server: RemoteOpenAIServer, reference):
    """Without a prompt name: the folder's default route (document)."""
    size = reference["document"].shape[1]
    tei = requests.post(server.url_for("embed_sparse"), json={"inputs": TEXTS})
    tei.raise_for_status()
    for i, want in enumerate(reference["plain_document"]):
        _assert_close("document", _dense(tei.json()[i], size), want)


def test_unknown_prompt_name_is_refused(server: RemoteOpenAIServer):
    # TEI's answer to a prompt name that is no prompt (and here no route).
    response = requests.post(
        server.url_for("embed_sparse"), json={"inputs": TEXTS, "prompt_name": "x"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["error_type"] == "Validation"
