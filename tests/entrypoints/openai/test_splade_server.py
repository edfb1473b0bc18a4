# SPDX-License-Identifier: Apache-2.0
"""The OpenAI-compatible server gives the same SPLADE vectors as offline."""
import torch

from tests.conftest import vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer


def test_served_embeddings_equal_offline(splade_tiny, splade_llm):
    offline = vllm_vectors(splade_llm, PARITY_TEXTS)
    with SpladeServer(splade_tiny) as server:
        got = []
        for i in range(0, len(PARITY_TEXTS), 16):
            body = server.post("/v1/embeddings", {
                "model": server.model,
                "input": PARITY_TEXTS[i:i + 16]
            })
            got += [d["embedding"] for d in body["data"]]
    got = torch.tensor(got)
    assert got.shape == offline.shape
    assert torch.equal(got > 0, offline > 0)
    torch.testing.assert_close(got, offline, rtol=0, atol=1e-5)
