# SPDX-License-Identifier: Apache-2.0
import os
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer


# The key of the servers that run with --api-key, as a shared server does
# (SpladeServer.request sends it; test_embed_sparse.py checks the lock).
API_KEY = "splade-test-key"


@pytest.fixture(scope="session")
def splade_server(splade_tiny):
    """splade-tiny served as SPLADE, with an API key. A plain
    BertForMaskedLM folder is upstream's per-token logits model, so it
    takes the architecture override (a SparseEncoder folder would need no
    flags)."""
    with SpladeServer(splade_tiny, api_key=API_KEY) as server:
        yield server


@pytest.fixture(scope="session")
def stock_splade_server(splade_tiny):
    """splade-tiny served by stock vLLM (the unpatched CPU build of the pin,
    SPLADE_STOCK_SITE) with the vllm-splade plugin, with an API key: what
    a user of the official wheel runs on a shared server."""
    site = os.environ.get("SPLADE_STOCK_SITE",
                          str(ROOT / "build/vllm-base-site"))
    if not os.path.isdir(os.path.join(site, "vllm")):
        pytest.fail(f"{site} has no vLLM: run scripts/build-base-site.sh")
    with SpladeServer(splade_tiny, env={"PYTHONPATH": site},
                      api_key=API_KEY) as server:
        # The plugin serves its own classes only on a vLLM without the
        # series, and says so (/version has no build suffix).
        log = Path(server.log.name).read_text()
        assert "vllm-splade: serving BertSpladeSparseEmbeddingModel" in log, (
            f"not stock vLLM + the plugin: see {server.log.name}")
        yield server


@pytest.fixture(scope="session")
def router_server(splade_tiny_router):
    """splade-tiny as an inference-free SparseEncoder: no flags (and no
    API key: every route open, as vLLM serves without one)."""
    with SpladeServer(splade_tiny_router, hf_overrides=None) as server:
        yield server


@pytest.fixture(scope="session")
def has_embed_sparse(splade_server) -> bool:
    """POST /embed_sparse (TEI's protocol) is served: the vllm-splade
    endpoint plugin, enabled with VLLM_PLUGINS as a user does."""
    status, _ = splade_server.request("/embed_sparse", {"inputs": "probe"})
    assert status != 404, (
        "/embed_sparse is a 404: the vllm-splade plugin is not installed in "
        "this venv or not enabled (VLLM_PLUGINS=vllm_splade,"
        "vllm_splade_embed_sparse)")
    return True


@pytest.fixture
def embed_sparse(has_embed_sparse) -> None:
    """Use in tests of /embed_sparse (fails while the route is absent)."""


@pytest.fixture(scope="session")
def offline_vectors(splade_llm) -> dict[str, torch.Tensor]:
    """The offline LLM.embed vector of every parity text."""
    return dict(zip(PARITY_TEXTS, vllm_vectors(splade_llm, PARITY_TEXTS)))
