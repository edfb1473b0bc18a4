# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Chunked prefill asked for an encoder-only pooling model, which has no KV
cache to prefill into in chunks."""

import os

import pytest

from vllm.engine.arg_utils import EngineArgs

MODEL = os.environ.get(
    "VLLM_TEST_EMBED_MODEL", "sentence-transformers/all-MiniLM-L6-v2"
)


def test_bert_embedding_sizes_its_step_for_whole_prompts():
    """Chunked prefill is turned off at config time, before the step is
    sized, so the default step holds a whole prompt. (The engine core used
    to turn it off only after the scheduler had been sized for chunks: a
    prompt longer than the step was then never scheduled, and held up every
    request queued behind it.)"""
    config = EngineArgs(
        model=MODEL, runner="pooling", enable_chunked_prefill=True
    ).create_engine_config()
    scheduler = config.scheduler_config
    assert not scheduler.enable_chunked_prefill
    assert scheduler.max_num_batched_tokens >= config.model_config.max_model_len


def test_bert_embedding_refuses_an_explicit_step_shorter_than_its_prompts():
    with pytest.raises(
        ValueError,
        match=r"max_num_batched_tokens \(128\) is smaller than max_model_len",
    ):
        EngineArgs(
            model=MODEL,
            runner="pooling",
            enable_chunked_prefill=True,
            max_model_len=256,
            max_num_batched_tokens=128,
            max_num_seqs=128,
        ).create_engine_config()
