# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The TEI-compatible ``/embed_sparse`` endpoint of SPLADE models."""

import contextlib
import json
import os
import socket

import jsonschema
import numpy as np
import pytest
import requests

from tests.utils import RemoteOpenAIServer
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
        # Compiled (vLLM's default, no --enforce-eager), as production runs.
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


def _assert_error(
    response: requests.Response, status: int, error_type: str, *fragments: str
) -> str:
    """TEI's error: its status for the kind, and its body."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "error_type"}, body
    assert body["error_type"] == error_type, body
    for fragment in fragments:
        assert fragment in body["error"], body
    return body["error"]


@pytest.fixture(scope="module")
def sparse_encoder():
    from sentence_transformers import SparseEncoder

    model = SparseEncoder(MODEL_NAME, device="cpu")
    model.max_seq_length = MAX_MODEL_LEN
    return model


def _reference(model, texts: list[str], truncation_side: str = "right") -> np.ndarray:
    """sentence-transformers' vectors, its tokenizer truncating on this side."""
    tokenizer = model.tokenizer
    saved, tokenizer.truncation_side = tokenizer.truncation_side, truncation_side
    try:
        vectors = model.encode(texts, convert_to_tensor=True)
    finally:
        tokenizer.truncation_side = saved
    return vectors.to_dense().float().cpu().numpy()


def _assert_matches(sparse: list[dict], vector: np.ndarray) -> None:
    indices = [term["index"] for term in sparse]
    assert indices == sorted(indices)
    assert all(term["value"] > 0 for term in sparse)
    assert indices == np.flatnonzero(vector).tolist()
    values = np.array([term["value"] for term in sparse], dtype=np.float32)
    # The same fp32 model, its GEMMs summed in another order.
    np.testing.assert_allclose(values, vector[indices], rtol=0, atol=1e-5)


@pytest.mark.parametrize("truncate", [None, "unset"])
def test_truncate_unset_truncates(
    server: RemoteOpenAIServer, sparse_encoder, truncate
):
    """TEI 1.9 (`--auto-truncate` true by default): an input longer than the
    model's maximum is cut when `truncate` is unset or null, as with true."""
    body = {"inputs": [LONG_TEXT, TEXTS[0]]}
    if truncate != "unset":
        body["truncate"] = truncate
    response = _embed_sparse(server, **body)
    response.raise_for_status()
    want = _embed_sparse(server, inputs=[LONG_TEXT, TEXTS[0]], truncate=True)
    assert response.json() == want.json()


def test_tei_request(server: RemoteOpenAIServer, sparse_encoder):
    """A request as TEI's schema writes it, `truncate: null` (unset) and a
    field TEI does not know (ignored, as TEI's serde does) included."""
    body = {
        "inputs": TEXTS,
        "truncate": None,
        "truncation_direction": "Right",
        "prompt_name": None,
        "normalize": True,
    }
    response = _embed_sparse(server, **body)
    response.raise_for_status()
    for sparse, vector in zip(response.json(), _reference(sparse_encoder, TEXTS)):
        assert all(set(term) == {"index", "value"} for term in sparse)
        _assert_matches(sparse, vector)
    assert int(response.headers["x-compute-characters"]) == sum(map(len, TEXTS))


def test_single_string_and_float32_printing(server: RemoteOpenAIServer, sparse_encoder):
    response = _embed_sparse(server, inputs=TEXTS[0])
    response.raise_for_status()
    (sparse,) = response.json()
    _assert_matches(sparse, _reference(sparse_encoder, TEXTS[:1])[0])
    # TEI prints float32: the shortest decimal that round-trips it.
    numbers = json.loads(response.text, parse_float=str)[0]
    for term in numbers:
        assert term["value"] == str(np.float32(term["value"])), term


def test_token_ids(server: RemoteOpenAIServer, sparse_encoder, tokenizer):
    """Token-id inputs, in TEI's shapes: one list of ids, a list of lists,
    and a list mixing ids and text. Ids are taken as given (no special
    tokens added), so a text's own ids give the text's vector."""
    ids = [tokenizer(text)["input_ids"] for text in TEXTS]
    want = _reference(sparse_encoder, TEXTS)

    response = _embed_sparse(server, inputs=ids[0])
    response.raise_for_status()
    (sparse,) = response.json()
    _assert_matches(sparse, want[0])
    assert response.headers["x-compute-tokens"] == str(len(ids[0]))

    for inputs in (ids, [ids[0], TEXTS[1]]):
        result = _embed_sparse(server, inputs=inputs).json()
        for sparse, vector in zip(result, want, strict=True):
            _assert_matches(sparse, vector)


@pytest.mark.parametrize("direction", ["Right", "Left", "right", "left"])
def test_truncate(
    server: RemoteOpenAIServer, sparse_encoder, tokenizer, direction: str
):
    """Truncation on either side keeps the special tokens, as TEI (and a
    tokenizer truncating on that side) does."""
    response = _embed_sparse(
        server, inputs=LONG_TEXT, truncate=True, truncation_direction=direction
    )
    response.raise_for_status()
    (sparse,) = response.json()
    side = direction.lower()
    _assert_matches(sparse, _reference(sparse_encoder, [LONG_TEXT], side)[0])
    assert response.headers["x-compute-tokens"] == str(MAX_MODEL_LEN)

    kept, dropped = ("apple", "banana") if side == "right" else ("banana", "apple")
    weights = {term["index"]: term["value"] for term in sparse}
    (kept_id,) = tokenizer.convert_tokens_to_ids([kept])
    (dropped_id,) = tokenizer.convert_tokens_to_ids([dropped])
    assert weights.get(kept_id, 0.0) > weights.get(dropped_id, 0.0)


def test_truncate_token_ids(server: RemoteOpenAIServer, sparse_encoder, tokenizer):
    """Token ids are cut as given, as TEI cuts them: no special token is
    added back."""
    ids = tokenizer(LONG_TEXT, add_special_tokens=False)["input_ids"]
    for side, kept in (("right", ids[:MAX_MODEL_LEN]), ("left", ids[-MAX_MODEL_LEN:])):
        (sparse,) = _embed_sparse(
            server, inputs=ids, truncate=True, truncation_direction=side
        ).json()
        (want,) = _embed_sparse(server, inputs=kept).json()
        assert [t["index"] for t in sparse] == [t["index"] for t in want]
        np.testing.assert_allclose(
            [t["value"] for t in sparse], [t["value"] for t in want], atol=1e-5
        )


@pytest.mark.parametrize(
    ("body", "status", "error_type", "message"),
    [
        # TEI's Empty, 400.
        ({"inputs": ""}, 400, "Empty", "`inputs` cannot be empty"),
        ({"inputs": []}, 400, "Empty", "`inputs` cannot be empty"),
        ({"inputs": [[]]}, 400, "Empty", "`inputs` cannot be empty"),
        ({"inputs": ["fine", ""]}, 400, "Empty", "`inputs` cannot be empty"),
        # TEI's Validation: 422 since TEI 1.9.0 (413 up to 1.8).
        (
            {"inputs": ["short", LONG_TEXT], "truncate": False},
            422,
            "Validation",
            "maximum context",
        ),
        ({"inputs": LONG_TEXT, "truncate": False}, 422, "Validation", "512"),
        ({"inputs": ["word"] * 33}, 422, "Validation", "batch size 33 > maximum"),
        ({"inputs": [10**6]}, 422, "Validation", "Token id 1000000 is out of"),
        ({"inputs": "x", "prompt_name": "query"}, 422, "Validation", "no prompts"),
        # TEI's JSON extractor: a body that is not the request, 422.
        ({"truncate": True}, 422, "Validation", "inputs: Field required"),
        ({"inputs": 5}, 422, "Validation", "inputs: expected a string"),
        ({"inputs": [1, "a"]}, 422, "Validation", "inputs: expected a string"),
        ({"inputs": [-1]}, 422, "Validation", "inputs: expected a string"),
        ({"inputs": [2**32]}, 422, "Validation", "inputs: expected a string"),
        ({"inputs": "x", "truncate": "yes"}, 422, "Validation", "truncate"),
        ({"inputs": "x", "truncation_direction": "up"}, 422, "Validation", "'Left'"),
        ({"inputs": "x", "truncation_direction": None}, 422, "Validation", "'Left'"),
    ],
)
def test_errors(
    server: RemoteOpenAIServer, body: dict, status: int, error_type: str, message: str
):
    response = requests.post(server.url_for("embed_sparse"), json=body)
    _assert_error(response, status, error_type, message)


@pytest.mark.parametrize(
    ("data", "content_type", "status", "message"),
    [
        (b'{"inputs": "a"', "application/json", 400, "Failed to parse"),
        (b'{"inputs": ["a", "b \\ud800"]}', "application/json", 400, "position 2"),
        (b'{"inputs": "a"}', "text/plain", 415, "Content-Type: application/json"),
    ],
)
def test_unreadable_bodies(
    server: RemoteOpenAIServer, data: bytes, content_type: str, status, message
):
    response = requests.post(
        server.url_for("embed_sparse"),
        data=data,
        headers={"Content-Type": content_type},
    )
    _assert_error(response, status, "Validation", message)


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


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"inputs": "x", "top_k": 0}, "greater than or equal to 1"),
        ({"inputs": "x", "top_k": 2.5}, "Input should be a valid integer"),
        ({"inputs": "x", "return_tokens": 1}, "Input should be a valid boolean"),
        ({"inputs": "x", "threshold": -0.5}, "greater than or equal to 0"),
        ({"inputs": "x", "threshold": "0.5"}, "Input should be a valid number"),
    ],
)
def test_invalid_extras(server: RemoteOpenAIServer, body: dict, message: str):
    response = requests.post(server.url_for("embed_sparse"), json=body)
    _assert_error(response, 422, "Validation", message)


def test_priority_needs_priority_scheduling(server: RemoteOpenAIServer):
    # This server schedules first come, first served: a priority would be
    # silently ignored.
    response = _embed_sparse(server, inputs="x", priority=1)
    _assert_error(response, 422, "Validation", "--scheduling-policy priority")
    _embed_sparse(server, inputs="x", priority=0).raise_for_status()


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
    assert b'"error":"Failed to buffer the request body' in answer


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
