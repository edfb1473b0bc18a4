# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""ModernBERT's masked-LM head against sentence-transformers and
transformers, on a seeded random ModernBertForMaskedLM written here
(sliding-window layers over 16 tokens, gelu_new head, no biases in the head
and norms, tied decoder saved without its weight): as SPLADE from a
SparseEncoder folder with no flags, and as per-token masked-LM logits."""

import pytest
import torch

from .test_splade import (
    ATOL,
    TEXTS,
    assert_same_sparse_vectors,
    save_random_splade,
    save_sparse_encoder,
    sentence_transformers_vectors,
    splade_runner,
)


@pytest.fixture(scope="module")
def random_modernbert(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("random-modernbert"))
    save_random_splade(path, "ModernBertForMaskedLM")
    return path


def test_splade_sparse_encoder_matches_sentence_transformers(
    vllm_runner, random_modernbert, tmp_path
):
    path = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(path, random_modernbert, "max", "relu")
    with splade_runner(vllm_runner, path, hf_overrides=None) as vllm_model:
        assert vllm_model.llm.model_config.architecture == (
            "ModernBertSpladeSparseEmbeddingModel"
        )
        got = torch.tensor(vllm_model.embed(TEXTS))
    assert_same_sparse_vectors(got, sentence_transformers_vectors(path, TEXTS))


def test_masked_lm_logits_match_transformers(vllm_runner, random_modernbert):
    """A plain ModernBertForMaskedLM folder keeps its masked-LM meaning:
    per-token vocabulary distributions, as BertForMaskedLM."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    with vllm_runner(
        random_modernbert, runner="pooling", dtype="float32", max_model_len=None
    ) as vllm_model:
        assert vllm_model.llm.model_config.architecture == "ModernBertForMaskedLM"
        got = vllm_model.token_classify(TEXTS)

    tokenizer = AutoTokenizer.from_pretrained(random_modernbert)
    model = AutoModelForMaskedLM.from_pretrained(random_modernbert).eval()
    for text, g in zip(TEXTS, got):
        with torch.inference_mode():
            inputs = tokenizer([text], return_tensors="pt", return_token_type_ids=False)
            logits = model(**inputs).logits[0]
        torch.testing.assert_close(g.float(), logits.softmax(-1), rtol=0, atol=ATOL)
