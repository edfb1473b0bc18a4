# SPDX-License-Identifier: Apache-2.0
import pytest
import torch

from tests.conftest import vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer


@pytest.fixture(scope="session")
def splade_server(splade_tiny):
    """splade-tiny served with no flags (a plain BertForMaskedLM folder)."""
    with SpladeServer(splade_tiny, hf_overrides=None) as server:
        yield server


@pytest.fixture(scope="session")
def offline_vectors(splade_llm) -> dict[str, torch.Tensor]:
    """The offline LLM.embed vector of every parity text."""
    return dict(zip(PARITY_TEXTS, vllm_vectors(splade_llm, PARITY_TEXTS)))
