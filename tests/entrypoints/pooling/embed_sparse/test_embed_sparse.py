# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The TEI-compatible ``/embed_sparse`` endpoint of SPLADE models."""

import contextlib
import json
import os
import socket
from unittest.mock import MagicMock

import jsonschema
import numpy as np
import pytest
import requests
from fastapi import FastAPI

from tests.utils import RemoteOpenAIServer
from vllm.entrypoints.pooling.factories import register_pooling_api_routers
from vllm.tokenizers import get_tokenizer

MODEL_NAME = os.environ.get(
    "VLLM_TEST_SPLADE_MODEL", "naver/splade-cocondenser-ensembledistil"
)
MAX_MODEL_LEN = 512
TEXTS = [
    "what causes aging fast",
    "The capital of France is Paris, a city on the Seine.",
]
# Right truncation keeps the apples, left truncation the bananas.
LONG_TEXT = "apple " * 400 + "banana " * 400

# The response of TEI's /embed_sparse, from its OpenAPI schema
# (docs/openapi.json of text-embeddings-inference 1.7: EmbedSparseResponse
# and SparseValue).
TEI_EMBED_SPARSE_RESPONSE = {
    "type": "array",
    "items": {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["index", "value"],
            "properties": {
                "index": {"type": "integer", "minimum": 0},
                "value": {"type": "number"},
            },
        },
    },
}


@pytest.fixture(scope="module")
def server():
    args = [
        "--runner",
        "pooling",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--hf-overrides",
        json.dumps({"architectures": ["BertSpladeSparseEmbeddingModel"]}),
    ]
    with RemoteOpenAIServer(MODEL_NAME, args) as remote_server:
        yield remote_server


@pytest.fixture(scope="module")
def tokenizer():
    return get_tokenizer(MODEL_NAME)


def _embed_sparse(server: RemoteOpenAIServer, **body) -> requests.Response:
    response = requests.post(server.url_for("embed_sparse"), json=body)
    if response.ok:
        jsonschema.validate(response.json(), TEI_EMBED_SPARSE_RESPONSE)
    return response


def _dense(server: RemoteOpenAIServer, texts: list[str], **extra) -> np.ndarray:
    response = requests.post(
        server.url_for("v1/embeddings"),
        json={"model": MODEL_NAME, "input": texts, **extra},
    )
    response.raise_for_status()
    data = response.json()["data"]
    return np.array([d["embedding"] for d in data], dtype=np.float32)


def _assert_matches_dense(sparse: list[dict], dense: np.ndarray) -> None:
    indices = [term["index"] for term in sparse]
    assert indices == sorted(indices)
    assert indices == np.flatnonzero(dense).tolist()
    values = np.array([term["value"] for term in sparse], dtype=np.float32)
    # Two requests may be batched differently, so their GEMMs sum in another
    # order: fp32 rounding apart (1.5e-6 seen), the same vector.
    np.testing.assert_allclose(values, dense[indices], rtol=0, atol=1e-5)


def _assert_error(response: requests.Response, *fragments: str) -> str:
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_tei_request(server: RemoteOpenAIServer):
    """A request as TEI's schema writes it (EmbedSparseRequest: its enum
    spells the direction "Right")."""
    body = {
        "inputs": TEXTS,
        "truncate": False,
        "truncation_direction": "Right",
        "prompt_name": None,
    }
    response = _embed_sparse(server, **body)
    response.raise_for_status()
    assert len(response.json()) == len(TEXTS)


def test_matches_embeddings(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs=TEXTS)
    response.raise_for_status()
    result = response.json()
    dense = _dense(server, TEXTS)
    assert len(result) == len(TEXTS)
    for sparse, vector in zip(result, dense):
        assert sparse, "SPLADE vector has no active terms"
        assert all(set(term) == {"index", "value"} for term in sparse)
        _assert_matches_dense(sparse, vector)


def test_single_string_and_float32_printing(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs=TEXTS[0])
    response.raise_for_status()
    (sparse,) = response.json()
    _assert_matches_dense(sparse, _dense(server, [TEXTS[0]])[0])
    # TEI prints float32: the shortest decimal that round-trips it.
    numbers = json.loads(response.text, parse_float=str)[0]
    for term in numbers:
        assert term["value"] == str(np.float32(term["value"])), term


def test_top_k(server: RemoteOpenAIServer):
    (full,) = _embed_sparse(server, inputs=TEXTS[0]).json()
    (top,) = _embed_sparse(server, inputs=TEXTS[0], top_k=5).json()
    assert len(top) == 5
    indices = [term["index"] for term in top]
    assert indices == sorted(indices)
    largest = sorted(full, key=lambda term: term["value"], reverse=True)[:5]
    assert sorted(indices) == sorted(term["index"] for term in largest)
    by_index = {term["index"]: term["value"] for term in full}
    assert all(by_index[term["index"]] == term["value"] for term in top)

    (everything,) = _embed_sparse(server, inputs=TEXTS[0], top_k=100_000).json()
    assert everything == full


def test_threshold(server: RemoteOpenAIServer):
    (full,) = _embed_sparse(server, inputs=TEXTS[0]).json()
    values = sorted(term["value"] for term in full)
    threshold = values[len(values) // 2]
    (pruned,) = _embed_sparse(server, inputs=TEXTS[0], threshold=threshold).json()
    assert pruned == [term for term in full if term["value"] >= threshold]
    assert 0 < len(pruned) < len(full)
    # With top_k, both apply; 0 keeps every non-zero term.
    (both,) = _embed_sparse(
        server, inputs=TEXTS[0], threshold=threshold, top_k=2
    ).json()
    assert len(both) == 2 and all(term in pruned for term in both)
    assert _embed_sparse(server, inputs=TEXTS[0], threshold=0).json() == [full]
    (none,) = _embed_sparse(server, inputs=TEXTS[0], threshold=1e9).json()
    assert none == []


def test_return_tokens(server: RemoteOpenAIServer, tokenizer):
    (sparse,) = _embed_sparse(server, inputs=TEXTS[0], return_tokens=True).json()
    indices = [term["index"] for term in sparse]
    tokens = [term["token"] for term in sparse]
    assert tokens == tokenizer.convert_ids_to_tokens(indices)
    assert "aging" in tokens


def test_too_long_without_truncate(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs=["short", LONG_TEXT])
    _assert_error(response, str(MAX_MODEL_LEN), str(MAX_MODEL_LEN + 1))


@pytest.mark.parametrize("direction", ["right", "Right", "left", "Left"])
def test_truncate(server: RemoteOpenAIServer, tokenizer, direction: str):
    response = _embed_sparse(
        server, inputs=LONG_TEXT, truncate=True, truncation_direction=direction
    )
    response.raise_for_status()
    (sparse,) = response.json()
    side = direction.lower()
    extra: dict = {"truncate_prompt_tokens": -1}
    if side == "left":
        extra["truncation_side"] = "left"
    _assert_matches_dense(sparse, _dense(server, [LONG_TEXT], **extra)[0])

    kept, dropped = ("apple", "banana") if side == "right" else ("banana", "apple")
    weights = {term["index"]: term["value"] for term in sparse}
    (kept_id,) = tokenizer.convert_tokens_to_ids([kept])
    (dropped_id,) = tokenizer.convert_tokens_to_ids([dropped])
    assert weights.get(kept_id, 0.0) > weights.get(dropped_id, 0.0)


@pytest.mark.parametrize("inputs", ["", [], ["fine", ""]])
def test_empty_inputs(server: RemoteOpenAIServer, inputs):
    _assert_error(_embed_sparse(server, inputs=inputs), "`inputs` cannot be empty")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"inputs": "x", "unknown": 1}, "Extra inputs are not permitted"),
        ({"inputs": "x", "truncation_side": "left"}, "Extra inputs are not permitted"),
        ({"inputs": 5}, "Input should be a valid string"),
        ({"inputs": [1, 2]}, "Input should be a valid string"),
        ({"inputs": "x", "truncate": "yes"}, "Input should be a valid boolean"),
        ({"inputs": "x", "truncation_direction": "middle"}, "Input should be 'right'"),
        ({"inputs": "x", "top_k": 0}, "greater than or equal to 1"),
        ({"inputs": "x", "top_k": -3}, "greater than or equal to 1"),
        ({"inputs": "x", "top_k": 2.5}, "Input should be a valid integer"),
        ({"inputs": "x", "return_tokens": 1}, "Input should be a valid boolean"),
        ({"inputs": "x", "threshold": -0.5}, "greater than or equal to 0"),
        ({"inputs": "x", "threshold": "0.5"}, "Input should be a valid number"),
        ({"inputs": "x", "threshold": [1]}, "Input should be a valid number"),
    ],
)
def test_invalid_request(server: RemoteOpenAIServer, body: dict, message: str):
    response = requests.post(server.url_for("embed_sparse"), json=body)
    _assert_error(response, message)


def test_priority_needs_priority_scheduling(server: RemoteOpenAIServer):
    # This server schedules first come, first served: a priority would be
    # silently ignored.
    response = _embed_sparse(server, inputs="x", priority=1)
    _assert_error(response, "--scheduling-policy priority")
    _embed_sparse(server, inputs="x", priority=0).raise_for_status()


def test_prompt_name_refused(server: RemoteOpenAIServer):
    response = _embed_sparse(server, inputs="x", prompt_name="query")
    _assert_error(response, "not supported")
    response = _embed_sparse(server, inputs="x", prompt_name=None)
    response.raise_for_status()


def test_max_client_batch_size(server: RemoteOpenAIServer):
    # TEI's default cap and answer: 32 inputs pass, 33 are a 422.
    response = _embed_sparse(server, inputs=["word"] * 32)
    response.raise_for_status()
    assert len(response.json()) == 32
    response = _embed_sparse(server, inputs=["word"] * 33)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == 422
    assert error["message"] == "batch size 33 > maximum allowed batch size 32"


def test_invalid_unicode(server: RemoteOpenAIServer):
    # Valid JSON, but a lone surrogate is no text a tokenizer can take.
    response = requests.post(
        server.url_for("embed_sparse"),
        data=b'{"inputs": ["fine", "a \\ud800 b"]}',
        headers={"Content-Type": "application/json"},
    )
    _assert_error(response, "`inputs` must be valid Unicode", "position 2")


def _raw_request(server: RemoteOpenAIServer, headers: str, chunks=()) -> bytes:
    """Send a POST /embed_sparse with these headers and body chunks over a
    socket of its own; return what the server answered, and stop sending
    once it has answered (or closed)."""
    host, port = server.host, server.port
    with socket.create_connection((host, port), timeout=30) as sock:
        request = f"POST /embed_sparse HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n"
        sock.sendall(request.encode())
        sock.settimeout(0.01)
        answer = b""
        for chunk in chunks:
            with contextlib.suppress(TimeoutError):
                answer += sock.recv(65536)
            if answer:
                break
            try:
                sock.sendall(chunk)
            except OSError:  # closed by the server: its answer is queued
                break
        sock.settimeout(30)
        while b"\r\n\r\n" not in answer and (part := sock.recv(65536)):
            answer += part
        return answer


def test_body_over_payload_limit_by_content_length(server: RemoteOpenAIServer):
    """TEI's 413 over 2 MB, answered from Content-Length alone: not one byte
    of the body is sent."""
    headers = "Content-Type: application/json\r\nContent-Length: 2000001\r\n"
    answer = _raw_request(server, headers)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"Request body larger than 2000000 bytes" in answer


def test_chunked_body_over_payload_limit(server: RemoteOpenAIServer):
    """A chunked body is refused once 2 MB of it have been read: the server
    answers and closes long before 64 MB could be sent."""
    block = b"x" * 65536
    chunk = f"{len(block):x}\r\n".encode() + block + b"\r\n"
    headers = "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
    sent = []

    def chunks():
        for _ in range(1024):  # 64 MB
            sent.append(len(block))
            yield chunk

    answer = _raw_request(server, headers, chunks())
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sum(sent) < 32 << 20


@pytest.mark.parametrize(
    ("sparse_task", "pooling_task", "served"),
    [
        ("embed", "embed", True),  # SPLADE
        (None, "embed", False),  # a dense model
        ("token_classify", "token_classify", True),  # BGE-M3
        ("token_classify", "embed", True),  # BGE-M3, dense endpoints
    ],
)
def test_route_only_for_sparse_embedding_models(
    sparse_task: str | None, pooling_task: str, served: bool
):
    """/embed_sparse is in the API (and its OpenAPI schema) only when the
    model's class declares SupportsSparseEmbedding, whatever task the other
    endpoints serve."""
    app = FastAPI()
    model_config = MagicMock(
        is_sparse_embedding_model=sparse_task is not None,
        sparse_embedding_task=sparse_task,
    )
    model_config.get_pooling_task.return_value = pooling_task
    register_pooling_api_routers(app, ("embed", "token_classify"), model_config)
    assert ("/embed_sparse" in app.openapi()["paths"]) == served
