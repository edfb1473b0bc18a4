# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""ModernBERT's masked-LM head against sentence-transformers and
transformers, on a seeded random ModernBertForMaskedLM written here
(sliding-window layers over 16 tokens, gelu_new head, no biases in the head
and norms, tied decoder saved without its weight): as SPLADE from a
SparseEncoder folder with no flags, and as per-token masked-LM logits."""

import pytest

from .test_splade import (
    check_masked_lm_distributions,
    check_sparse_encoder_folder,
    save_random_splade,
)

pytestmark = [pytest.mark.core_model, pytest.mark.cpu_model]


@pytest.fixture(scope="module")
def random_modernbert(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("random-modernbert"))
    save_random_splade(path, "ModernBertForMaskedLM")
    return path


def test_splade_sparse_encoder_matches_sentence_transformers(
    vllm_runner, random_modernbert, tmp_path
):
    path = str(tmp_path / "sparse-encoder")
    check_sparse_encoder_folder(
        vllm_runner, random_modernbert, path, "ModernBertSpladeSparseEmbeddingModel"
    )


def test_masked_lm_logits_match_transformers(vllm_runner, random_modernbert):
    """A plain ModernBertForMaskedLM folder resolves to the native class:
    per-token masked-LM distributions (token_classify). Before it, vLLM
    resolved the architecture to the Transformers backend's
    TransformersForCausalLM converted to embeddings, which fails to load."""
    check_masked_lm_distributions(
        vllm_runner, random_modernbert, "ModernBertForMaskedLM"
    )
