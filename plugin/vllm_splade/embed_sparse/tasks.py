# SPDX-License-Identifier: Apache-2.0
"""Which pooling task gives a served model's sparse vectors."""

from vllm.config import ModelConfig

from .. import LEXICAL_MODELS, SPARSE_MODELS

# Lexical weights, BGE-M3's and mGTE's: one per input token, the model's
# `token_classify` output, which /embed_sparse reduces by token id.
TOKEN_CLASSIFY_MODELS = {"BgeM3EmbeddingModel", *LEXICAL_MODELS}


def sparse_embedding_task(model_config: ModelConfig) -> str | None:
    """`embed` for SPLADE (one weight per vocabulary token), `token_classify`
    for lexical weights (BGE-M3, mGTE), None for a model without sparse
    vectors."""
    architecture = model_config.architecture
    if architecture in TOKEN_CLASSIFY_MODELS:
        return "token_classify"
    if architecture in SPARSE_MODELS or getattr(
        model_config, "is_sparse_embedding_model", False
    ):
        return "embed"
    return None
