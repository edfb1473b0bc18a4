# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""An inference-free sparse encoder (a sentence-transformers Router) served
with the vllm-splade plugin, by the series with no flags or by stock vLLM
with two: `/embed_sparse` maps TEI's `prompt_name` onto the route, applying
the folder's prompt of that name, as encode_query / encode_document do."""

import importlib.util
import os

import numpy as np
import pytest
import requests

# The Router folder and sentence-transformers' vectors of the series' route
# test (tests/entrypoints/pooling/embed/, patch 17).
from tests.entrypoints.pooling.embed.test_embed_route import (  # noqa: F401
    TEXTS,
    _assert_close,
    reference,
    router_folder,
)
from tests.utils import RemoteOpenAIServer


@pytest.fixture(scope="module")
def server(router_folder):
    args = ["--dtype", "float32", "--max-model-len", "128"]
    if importlib.util.find_spec("vllm.model_executor.models.splade") is None:
        # Stock vLLM: a Router folder has no config.json at its root, so
        # `auto` cannot tell its format, and the tokenizer is the model
        # route's (the series resolves both itself).
        route = os.path.join(router_folder, "document_0_MLMTransformer")
        args += ["--config-format", "hf", "--tokenizer", route]
    with RemoteOpenAIServer(router_folder, args) as remote_server:
        yield remote_server


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
