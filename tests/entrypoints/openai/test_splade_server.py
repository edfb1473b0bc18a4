# SPDX-License-Identifier: Apache-2.0
"""The OpenAI-compatible server gives the same SPLADE vectors as offline."""
import torch

from tests.models.language.pooling.splade_texts import PARITY_TEXTS


def test_served_embeddings_equal_offline(splade_server, offline_vectors):
    got = torch.tensor(splade_server.embeddings(PARITY_TEXTS))
    want = torch.stack([offline_vectors[t] for t in PARITY_TEXTS])
    assert got.shape == want.shape
    assert torch.equal(got > 0, want > 0)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
