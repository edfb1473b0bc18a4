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


def test_large_float_json_responses_equal_base64(splade_server):
    """140 dense SPLADE vectors (4.27M floats) in one request: served as
    JSON floats (the series no longer caps them: 0.34's orjson encoder
    removed most of the stall the cap was for, docs/upstreaming.md), and
    equal to the same request as base64."""
    import base64

    import numpy as np
    texts = ["a"] * 140
    body = {"model": splade_server.model, "input": texts}
    status, data = splade_server.request("/v1/embeddings", body)
    assert status == 200, data[:300]
    floats = [d["embedding"] for d in json.loads(data)["data"]]
    status, data = splade_server.request("/v1/embeddings", {
        **body, "encoding_format": "base64"
    })
    assert status == 200, data[:300]
    packed = [
        np.frombuffer(base64.b64decode(d["embedding"]), dtype=np.float32)
        for d in json.loads(data)["data"]
    ]
    # Two requests, which the server may batch differently: the encoder's
    # GEMMs then differ in the last float bits. The encodings themselves
    # are exact (orjson writes the float32 value's shortest repr).
    torch.testing.assert_close(torch.tensor(floats),
                               torch.tensor(np.stack(packed)),
                               rtol=0,
                               atol=1e-5)
