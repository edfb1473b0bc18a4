# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The ``/embed_sparse`` endpoint plugin without a server: which task it
serves, its route, its error mapping and its API-key lock."""

import json
from unittest.mock import MagicMock

import pytest
from fastapi import FastAPI

from vllm.exceptions import QueueOverflowError
from vllm.v1.engine.exceptions import EngineDeadError
from vllm_splade.embed_sparse import EmbedSparsePlugin
from vllm_splade.embed_sparse.api_router import tei_error_response
from vllm_splade.embed_sparse.tasks import sparse_embedding_task


@pytest.mark.parametrize(
    ("architecture", "series", "task"),
    [
        ("BertSpladeSparseEmbeddingModel", False, "embed"),  # SPLADE, stock
        ("DistilBertSpladeSparseEmbeddingModel", False, "embed"),
        ("MySpladeModel", True, "embed"),  # the series' SupportsSparseEmbedding
        ("BgeM3EmbeddingModel", False, "token_classify"),  # lexical weights
        ("BertModel", False, None),  # a dense model
    ],
)
def test_sparse_embedding_task(architecture: str, series: bool, task: str | None):
    """The task whose output /embed_sparse serves, by the served class."""
    model_config = MagicMock(spec=["architecture", "is_sparse_embedding_model"])
    model_config.architecture = architecture
    model_config.is_sparse_embedding_model = series
    assert sparse_embedding_task(model_config) == task


def test_plugin_attaches_the_route():
    """The endpoint plugin adds POST /embed_sparse (and its schema) to the
    API server; a pooling server is required."""
    plugin = EmbedSparsePlugin()
    assert plugin.name == "vllm_splade_embed_sparse"
    assert set(plugin.required_tasks) == {"embed", "token_classify"}
    app = FastAPI()
    plugin.attach_router(app)
    assert "post" in app.openapi()["paths"]["/embed_sparse"]


@pytest.mark.parametrize(
    ("exc", "status", "error_type"),
    [
        (QueueOverflowError(), 429, "Overloaded"),
        (EngineDeadError(), 503, "Unhealthy"),
        (RuntimeError("a bug"), 500, "Backend"),
    ],
)
def test_server_side_errors(exc: Exception, status: int, error_type: str):
    """Overload and an unhealthy engine as TEI answers them; any other fault
    stays a 5xx (TEI's Backend kind is a 424, which would hide it)."""
    response = tei_error_response(exc)
    assert response.status_code == status
    assert json.loads(response.body)["error_type"] == error_type


@pytest.mark.parametrize(
    ("api_key", "env_key", "key"),
    [
        (["s3cret"], None, "s3cret"),  # --api-key
        (["one", "two"], None, "two"),  # several keys: any of them
        (None, "s3cret", "s3cret"),  # VLLM_API_KEY
        (["s3cret"], "other", "s3cret"),  # --api-key wins over the variable
        (None, None, None),  # no key: the route is open
    ],
)
def test_api_key_locks_the_route(api_key, env_key, key, monkeypatch):
    """vLLM's middleware checks --api-key / VLLM_API_KEY only under /v1, /v2,
    /inference and /cohere: the plugin locks /embed_sparse itself, with
    vLLM's check of the bearer token, before the body is read (a request
    past the lock gets the 424 of a server without a SPLADE model here)."""
    import asyncio
    from argparse import Namespace

    from fastapi.testclient import TestClient

    from vllm import envs

    # VLLM_API_KEY as vLLM reads it (envs, cached once an engine started).
    monkeypatch.setattr(envs, "VLLM_API_KEY", env_key, raising=False)
    app = FastAPI()
    plugin = EmbedSparsePlugin()
    plugin.attach_router(app)
    with TestClient(app) as client:
        body = {"inputs": "what causes aging fast"}
        refused = {"error": "Unauthorized", "error_type": "Unauthorized"}
        # Before the server's keys are read, nothing gets through.
        response = client.post("/embed_sparse", json=body)
        assert (response.status_code, response.json()) == (401, refused)

        args = Namespace(api_key=api_key)
        asyncio.run(plugin.init_state(None, app.state, args))
        if key is None:
            assert client.post("/embed_sparse", json=body).status_code == 424
            return
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": key},  # no scheme
            {"Authorization": f"Basic {key}"},
        ):
            response = client.post("/embed_sparse", json=body, headers=headers)
            assert (response.status_code, response.json()) == (401, refused)
        # Refused before reading the body: an oversized one gets the 401 too.
        response = client.post(
            "/embed_sparse", content=b"x" * 3_000_000,
            headers={"Content-Type": "application/json"})
        assert response.status_code == 401
        response = client.post(
            "/embed_sparse", json=body, headers={"Authorization": f"Bearer {key}"}
        )
        assert response.status_code == 424, response.text


def test_endpoint_refuses_vllms_own_splade_class(monkeypatch):
    """With the endpoint in VLLM_PLUGINS but not the models' plugin, stock
    vLLM serves its own SPLADE class, whose vectors differ: the server
    refuses to start, saying which VLLM_PLUGINS to set. BGE-M3's lexical
    weights are vLLM's own model's, and the plugin's class is served."""
    import vllm_splade
    from vllm import ModelRegistry
    from vllm_splade.embed_sparse import check_splade_is_ours

    monkeypatch.setattr(vllm_splade, "series_in_tree", lambda: False)
    arch = "BertSpladeSparseEmbeddingModel"
    monkeypatch.setitem(ModelRegistry.models, arch, ModelRegistry.models[arch])
    ModelRegistry.register_model(arch, "vllm.model_executor.models.bert:" + arch)
    with pytest.raises(RuntimeError, match="VLLM_PLUGINS=vllm_splade,vllm_splade_embed"):
        check_splade_is_ours(arch, "embed")
    check_splade_is_ours("BgeM3EmbeddingModel", "token_classify")
    ModelRegistry.register_model(arch, f"vllm_splade.models.splade:{arch}")
    check_splade_is_ours(arch, "embed")
