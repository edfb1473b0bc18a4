# SPDX-License-Identifier: Apache-2.0
"""sentence-transformers folders load with no flags and pool as their
SpladePooling says; dense folders saved as BertForMaskedLM stay dense."""
import os
import shutil

import pytest
import torch

from tests.conftest import free_engine, st_vectors, vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS


def _no_flags_vectors(path: str, texts: list[str]) -> torch.Tensor:
    from vllm import LLM
    llm = LLM(model=path, dtype="float32", enforce_eager=True)  # No flags.
    try:
        assert llm.llm_engine.model_config.runner_type == "pooling"
        return vllm_vectors(llm, texts)
    finally:
        free_engine(llm)


def assert_sparse_close(got: torch.Tensor, want: torch.Tensor,
                        texts: list[str], pooling: str) -> None:
    assert got.shape == want.shape
    abs_diff = (got - want).abs()
    print(f"\n{pooling}: max abs diff {abs_diff.max().item():.3g}, "
          f"largest weight {want.max().item():.3g}")
    for text, g, w, d in zip(texts, got, want, abs_diff):
        assert torch.equal(g > 0, w > 0), f"non-zero terms differ: {text!r}"
        if pooling == "max":
            assert d.max().item() <= 1e-5, text
        else:
            # A sum adds up to 512 per-token weights, each within 1e-5:
            # hold it to 1e-5 relative to the weight.
            assert (d <= 1e-5 * w.abs().clamp(min=1)).all(), text


@pytest.mark.parametrize("pooling,activation", [("max", "relu"),
                                                ("sum", "relu"),
                                                ("max", "log1p_relu")])
def test_sparse_encoder_folder_loads_with_no_flags(tmp_path, splade_tiny,
                                                   pooling, activation):
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.models import (MLMTransformer,
                                                             SpladePooling)
    mlm = MLMTransformer(splade_tiny)
    SparseEncoder(modules=[
        mlm,
        SpladePooling(pooling_strategy=pooling,
                      activation_function=activation,
                      word_embedding_dimension=mlm.get_sentence_embedding_dimension())
    ],
                  device="cpu").save(str(tmp_path))
    want = st_vectors(SparseEncoder(str(tmp_path), device="cpu"),
                      PARITY_TEXTS)
    got = _no_flags_vectors(str(tmp_path), PARITY_TEXTS)
    assert_sparse_close(got, want, PARITY_TEXTS, pooling)


def test_plain_masked_lm_folder_is_splade_with_no_flags(
        splade_tiny, splade_llm):
    texts = PARITY_TEXTS[:12]
    torch.testing.assert_close(_no_flags_vectors(splade_tiny, texts),
                               vllm_vectors(splade_llm, texts),
                               rtol=0,
                               atol=1e-6)


def test_dense_sentence_transformers_masked_lm_folder_stays_dense(
        tmp_path, splade_tiny):
    """A dense model whose backbone is saved as BertForMaskedLM."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, Pooling, Transformer
    backbone = Transformer(splade_tiny)
    assert backbone.auto_model.config.architectures == ["BertForMaskedLM"]
    SentenceTransformer(modules=[
        backbone,
        Pooling(backbone.get_word_embedding_dimension(), "cls"),
        Normalize()
    ],
                        device="cpu").save(str(tmp_path))
    # Keep the BertForMaskedLM checkpoint itself: bert.-prefixed encoder
    # weights plus an MLM head that dense pooling must ignore.
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(splade_tiny, name), tmp_path / name)
    texts = PARITY_TEXTS[:20]
    want = SentenceTransformer(str(tmp_path), device="cpu").encode(
        texts, convert_to_tensor=True).float()
    got = _no_flags_vectors(str(tmp_path), texts)
    assert got.shape == (len(texts), 128)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
