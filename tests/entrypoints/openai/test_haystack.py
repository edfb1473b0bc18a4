# SPDX-License-Identifier: Apache-2.0
"""A real TEI client against /embed_sparse: Haystack's TEI sparse
embedders (huggingface-api-haystack 3.1.0), unchanged, in their own venv
(.venv-haystack, requirements/haystack.in), as TEI 1.9 answers them: a
query as a bare string, documents 32 a request and 4 requests at once in
async mode, documents over the model's 512 tokens among them (TEI 1.9
truncates when `truncate` is unset, which is all these clients send), and a
clear HTTP error for a batch TEI also refuses. Vectors against
sentence-transformers'."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

from tests.conftest import st_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS

ROOT = Path(__file__).resolve().parents[3]
HAYSTACK = ROOT / ".venv-haystack/bin/python"
LONG = ["the quick brown fox jumps over the lazy dog " * 80,
        "a b c d e f g " * 200]


def haystack_python() -> str:
    if not HAYSTACK.is_file():
        pytest.fail(f"{HAYSTACK} is missing: run `make setup`")
    return str(HAYSTACK)


def _dense(embedding: dict, size: int) -> torch.Tensor:
    vector = torch.zeros(size)
    vector[embedding["indices"]] = torch.tensor(embedding["values"])
    return vector


@pytest.fixture(scope="module")
def texts() -> dict[str, list[str]]:
    documents = (PARITY_TEXTS + LONG +
                 [f"{text} again" for text in PARITY_TEXTS[:20]])
    return {"queries": PARITY_TEXTS[:6], "documents": documents}


@pytest.fixture(scope="module")
def answers(splade_server, texts, tmp_path_factory) -> dict:
    job = tmp_path_factory.mktemp("haystack") / "job.json"
    job.write_text(json.dumps(texts))
    proc = subprocess.run(
        [haystack_python(), str(ROOT / "tests/entrypoints/openai/haystack_client.py"),
         splade_server.url, str(job)],
        capture_output=True, text=True, timeout=600,
        # The server's API key, where Haystack's TEI embedders read a token
        # (sent as `Authorization: Bearer`, as TEI's --api-key wants it).
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
             "HF_API_TOKEN": splade_server.api_key})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_documents_and_queries_match_sentence_transformers(
        answers, texts, splade_st, splade_tiny):
    # Three batches of up to 32, two documents over the 512 tokens among
    # them: Haystack sends `inputs` only, and TEI 1.9 cuts those.
    assert len(texts["documents"]) > 64
    size = json.loads((Path(splade_tiny) / "config.json").read_text())[
        "vocab_size"]
    for key, kind in (("queries", "queries"), ("queries_async", "queries"),
                      ("documents", "documents"),
                      ("documents_async", "documents")):
        got = torch.stack([_dense(e, size) for e in answers[key]])
        want = st_vectors(splade_st, texts[kind])
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5, msg=key)
        # The same terms: none appears or vanishes.
        assert ((got > 1e-5) <= (want > 0)).all(), key
        assert ((want > 1e-5) <= (got > 0)).all(), key


def test_a_refused_batch_is_a_clear_client_error(answers):
    refused = answers["refused"]
    assert refused is not None, "33 documents in one request were accepted"
    assert refused["status"] == 422
    assert refused["body"] == {
        "error": "batch size 33 > maximum allowed batch size 32",
        "error_type": "Validation",
    }
    assert re.search(r"Client error '422 Unprocessable (Content|Entity)'",
                     refused["message"]), refused["message"]
