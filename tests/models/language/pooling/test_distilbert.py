# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""DistilBERT against sentence-transformers and transformers, on a seeded
random DistilBertForMaskedLM written here (gelu_new, tied embeddings saved
without the projection weight, as transformers 5 saves them): as SPLADE
from a SparseEncoder folder with no flags, as per-token masked-LM logits,
and as a dense embedding model."""

import pytest
import torch

from .test_splade import (
    TEXTS,
    check_masked_lm_distributions,
    check_sparse_encoder_folder,
    save_random_splade,
)

pytestmark = [pytest.mark.core_model, pytest.mark.cpu_model]


@pytest.fixture(scope="module")
def random_distilbert(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("random-distilbert"))
    save_random_splade(path, "DistilBertForMaskedLM")
    return path


@pytest.mark.parametrize("layout", ["6.x", "5.x"])
def test_splade_sparse_encoder_matches_sentence_transformers(
    layout: str, vllm_runner, random_distilbert, tmp_path
):
    """DistilBERT SPLADE models (OpenSearch's neural sparse encoders, naver's
    splade-v3-distilbert) load from a SparseEncoder folder with no flags."""
    path = str(tmp_path / "sparse-encoder")
    check_sparse_encoder_folder(
        vllm_runner,
        random_distilbert,
        path,
        "DistilBertSpladeSparseEmbeddingModel",
        layout,
    )


def test_masked_lm_logits_match_transformers(vllm_runner, random_distilbert):
    """A plain DistilBertForMaskedLM folder resolves to the native class:
    per-token masked-LM distributions (token_classify). Before it, vLLM
    resolved the architecture to the Transformers backend's
    TransformersForCausalLM converted to embeddings, which fails to load."""
    check_masked_lm_distributions(
        vllm_runner, random_distilbert, "DistilBertForMaskedLM"
    )


def test_dense_embeddings_match_sentence_transformers(
    vllm_runner, random_distilbert, tmp_path
):
    """A dense sentence-transformers model on DistilBertModel, such as
    msmarco-distilbert-base-v4: mean pooling, as its modules.json says."""
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, DistilBertModel

    backbone = str(tmp_path / "distilbert")
    DistilBertModel.from_pretrained(random_distilbert).save_pretrained(backbone)
    AutoTokenizer.from_pretrained(random_distilbert).save_pretrained(backbone)
    path = str(tmp_path / "sentence-transformer")
    SentenceTransformer(backbone, device="cpu").save(path)  # mean pooling
    want = SentenceTransformer(path, device="cpu").encode(TEXTS, convert_to_tensor=True)
    with vllm_runner(
        path, runner="pooling", dtype="float32", max_model_len=None
    ) as vllm_model:
        assert vllm_model.llm.model_config.architecture == "DistilBertModel"
        got = torch.tensor(vllm_model.embed(TEXTS))
    torch.testing.assert_close(got, want.float(), rtol=0, atol=1e-5)
