# SPDX-License-Identifier: Apache-2.0
import pytest
import torch

from tests.conftest import vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer


@pytest.fixture(scope="session")
def splade_server(splade_tiny):
    """splade-tiny served as SPLADE. A plain BertForMaskedLM folder is
    upstream's per-token logits model, so it takes the architecture
    override (a SparseEncoder folder would need no flags)."""
    with SpladeServer(splade_tiny) as server:
        yield server


@pytest.fixture(scope="session")
def router_server(splade_tiny_router):
    """splade-tiny as an inference-free SparseEncoder: no flags."""
    with SpladeServer(splade_tiny_router, hf_overrides=None) as server:
        yield server


@pytest.fixture(scope="session")
def has_embed_sparse(splade_server) -> bool:
    """Whether the served build has POST /embed_sparse (TEI's protocol):
    being added to the series; until then the route is a 404."""
    status, _ = splade_server.request("/embed_sparse", {"inputs": "probe"})
    return status != 404


@pytest.fixture
def embed_sparse(has_embed_sparse) -> None:
    """Use in tests of /embed_sparse: skips them while the route is absent."""
    if not has_embed_sparse:
        pytest.skip("POST /embed_sparse is not in this vLLM build yet "
                    "(404): the TEI-protocol route is still being added to "
                    "the series")


@pytest.fixture(scope="session")
def offline_vectors(splade_llm) -> dict[str, torch.Tensor]:
    """The offline LLM.embed vector of every parity text."""
    return dict(zip(PARITY_TEXTS, vllm_vectors(splade_llm, PARITY_TEXTS)))
