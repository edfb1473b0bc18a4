# SPDX-License-Identifier: Apache-2.0
"""DistilBERT SPLADE (OpenSearch's neural sparse encoders and naver's
splade-v3-distilbert are DistilBertForMaskedLM) on real trained weights:
splade-tiny in DistilBERT's layout (tests/checkpoints.py), saved as a
sentence-transformers 6.x SparseEncoder folder and served with no flags.
The carried test_distilbert.py covers the 5.x layout, plain masked-LM
logits and dense embeddings on a random checkpoint."""
import pytest
import torch

from tests.checkpoints import save_distilbert_of
from tests.conftest import free_engine, make_llm, st_vectors, vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.models.language.pooling.test_splade_zero_flag import (
    _model_config, assert_sparse_close, save_sparse_encoder)

ARCHITECTURE = "DistilBertSpladeSparseEmbeddingModel"


def _has_distilbert_splade() -> bool:
    from vllm import ModelRegistry
    return ARCHITECTURE in ModelRegistry.get_supported_archs()


pytestmark = pytest.mark.skipif(
    not _has_distilbert_splade(),
    reason=f"{ARCHITECTURE} is not in this vLLM build's model registry")


def test_trained_distilbert_sparse_encoder_matches_sentence_transformers(
        tmp_path, splade_tiny, splade_llm):
    from sentence_transformers import SparseEncoder
    backbone = save_distilbert_of(splade_tiny, str(tmp_path / "distilbert"))
    path = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(path, backbone)
    assert _model_config(path).architecture == ARCHITECTURE

    want = st_vectors(SparseEncoder(path, device="cpu"), PARITY_TEXTS)
    # No --hf-overrides: the folder says SPLADE. (make_llm, not
    # _no_flags_vectors, whose engine's teardown takes the session engine's
    # process groups with it; test_splade_zero_flag.py runs last for that.)
    llm = make_llm(path, hf_overrides=None)
    try:
        assert llm.llm_engine.model_config.architecture == ARCHITECTURE
        got = vllm_vectors(llm, PARITY_TEXTS)
    finally:
        free_engine(llm)
    # Identical non-zero terms and <= 1e-5 per weight, text by text.
    assert_sparse_close(got, want, PARITY_TEXTS, "max")
    active = (got > 0).sum(1).float()
    print(f"active terms per text: mean {active.mean():.1f}, "
          f"max {active.max():.0f} of {got.shape[1]}")
    assert active.max() < 0.1 * got.shape[1]  # trained: sparse

    # The same trained network as splade-tiny's BERT: token type 0 folded
    # into the positions moves weights by float rounding only.
    torch.testing.assert_close(got, vllm_vectors(splade_llm, PARITY_TEXTS),
                               rtol=0, atol=1e-4)
