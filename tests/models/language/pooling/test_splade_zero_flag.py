# SPDX-License-Identifier: Apache-2.0
"""What the carried test_splade.py does not already cover about loading
with no flags: the real trained checkpoint saved as a sentence-transformers
6.x SparseEncoder, a dense sentence-transformers folder whose backbone is a
BertForMaskedLM (must not become SPLADE), and a user pooling type, which a
SPLADE model refuses with a message that says what to use instead."""
import os
import shutil

import pytest
import torch

from tests.conftest import (engine_start_error, free_engine, make_llm,
                            st_vectors, vllm_vectors)
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SPLADE_OVERRIDES


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


def save_sparse_encoder(path: str, backbone: str) -> None:
    """`backbone` as sentence-transformers 6.x saves a SparseEncoder."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import (SpladePooling,
                                                              Transformer)
    SparseEncoder(modules=[
        Transformer(backbone, transformer_task="fill-mask"),
        SpladePooling(pooling_strategy="max", activation_function="relu")
    ],
                  device="cpu").save(path)


def _model_config(path: str):
    """The ModelConfig an engine would get with no flags (no engine)."""
    from vllm.config import ModelConfig
    return ModelConfig(model=path, runner="pooling", dtype="float32")


def test_trained_sparse_encoder_folder_loads_with_no_flags(tmp_path,
                                                           splade_tiny):
    path = str(tmp_path / "sparse-encoder")
    save_sparse_encoder(path, splade_tiny)
    config = _model_config(path)
    assert config.architecture == "BertSpladeSparseEmbeddingModel"
    assert config.hf_config.splade_pooling_strategy == "max"
    assert config.hf_config.splade_activation_function == "relu"

    from sentence_transformers import SparseEncoder
    want = st_vectors(SparseEncoder(path, device="cpu"), PARITY_TEXTS)
    got = _no_flags_vectors(path, PARITY_TEXTS)
    assert_sparse_close(got, want, PARITY_TEXTS, "max")


def test_dense_sentence_transformers_masked_lm_folder_is_not_splade(
        tmp_path, splade_tiny):
    """A dense model (CLS pooling + Normalize) whose backbone is saved as
    BertForMaskedLM keeps upstream's meaning: no SPLADE architecture, no
    SPLADE pooling read from it."""
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
    # Keep the BertForMaskedLM checkpoint itself (sentence-transformers
    # saves the backbone as BertModel): bert.-prefixed encoder weights plus
    # an MLM head that dense pooling must ignore.
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(splade_tiny, name), tmp_path / name)
    config = _model_config(str(tmp_path))
    assert config.architecture == "BertForMaskedLM"
    assert not hasattr(config.hf_config, "splade_pooling_strategy")


def test_user_pooling_type_is_refused_with_a_hint(splade_tiny):
    """--pooler-config '{"pooling_type": "MEAN"}' would silently replace
    SPLADE pooling; the model refuses it at start and names
    splade_pooling_strategy."""
    message = engine_start_error(splade_tiny,
                                 pooler_config={"pooling_type": "MEAN"})
    assert "splade_pooling_strategy" in message, message
    assert "'MEAN'" in message, message


def test_splade_pooling_from_the_user_is_honoured(splade_tiny, splade_llm):
    """The supported way to choose for a checkpoint without a SpladePooling
    module: --hf-overrides splade_pooling_strategy."""
    texts = PARITY_TEXTS[:8]
    llm = make_llm(splade_tiny,
                   hf_overrides={
                       **SPLADE_OVERRIDES, "splade_pooling_strategy": "sum"
                   })
    try:
        summed = vllm_vectors(llm, texts)
    finally:
        free_engine(llm)
    maxed = vllm_vectors(splade_llm, texts)
    # Same terms (a sum of non-negatives is > 0 where the max is), larger
    # weights for every text with more than one token.
    assert torch.equal(summed > 0, maxed > 0)
    assert (summed >= maxed - 1e-5).all()
    assert (summed.sum(1) > maxed.sum(1)).all()
