# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The engine's checks of a model without a KV cache (encoder-only pooling
models), which it never prefills in chunks."""

import os

import pytest

from vllm import LLM

MODEL = os.environ.get(
    "VLLM_TEST_EMBED_MODEL", "sentence-transformers/all-MiniLM-L6-v2"
)


def test_bert_embedding_refuses_a_step_shorter_than_max_model_len(monkeypatch):
    """Chunked prefill asked for, the scheduler config accepts a step of
    fewer tokens than max_model_len; the engine then turns it off, as the
    model has no KV cache, and a longer prompt would wait forever for a
    step it fits. The engine refuses to start instead."""
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    with pytest.raises(
        ValueError,
        match=r"max_num_batched_tokens \(128\) is smaller than max_model_len",
    ):
        LLM(
            model=MODEL,
            runner="pooling",
            enable_chunked_prefill=True,
            max_model_len=256,
            max_num_batched_tokens=128,
            max_num_seqs=128,
            enforce_eager=True,
        )
