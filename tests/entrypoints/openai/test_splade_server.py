# SPDX-License-Identifier: Apache-2.0
"""The OpenAI-compatible server gives the same SPLADE vectors as offline."""
import json

import torch

from tests.models.language.pooling.splade_texts import PARITY_TEXTS


def test_served_embeddings_equal_offline(splade_server, offline_vectors):
    got = torch.tensor(splade_server.embeddings(PARITY_TEXTS))
    want = torch.stack([offline_vectors[t] for t in PARITY_TEXTS])
    assert got.shape == want.shape
    assert torch.equal(got > 0, want > 0)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_json_float_responses_are_capped(splade_server, offline_vectors):
    """140 dense SPLADE vectors are 4.27M floats, over the default
    --max-pooling-json-floats (2**22): refused as JSON floats, with a
    message that says what to do, and served as base64."""
    texts = ["a"] * 140
    for path, key in [("/v1/embeddings", "input"), ("/pooling", "input")]:
        body = {"model": splade_server.model, key: texts}
        status, data = splade_server.request(path, body)
        assert status == 400, data[:300]
        message = json.loads(data)["error"]["message"]
        assert "4273080 floats" in message and "base64" in message, message
        status, data = splade_server.request(path, {
            **body, "encoding_format": "base64"
        })
        assert status == 200, data[:300]
    # Under the cap, JSON floats as before.
    got = torch.tensor(splade_server.embeddings(["a"] * 137, batch_size=137))
    assert got.shape == (137, 30522)
