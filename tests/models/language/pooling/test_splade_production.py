# SPDX-License-Identifier: Apache-2.0
"""SPLADE as production runs it: compiled (torch.compile; CUDA graphs on a
GPU) in bf16, for every family the series serves, against
sentence-transformers' SparseEncoder. (Compiled fp32 is what the carried
tests run: test_splade.py's splade_runner and the family tests.)

In bf16 the encoder and, by default, the masked-LM head run in bf16, as
sentence-transformers' own bf16 model does: vLLM must be as close to the
fp32 reference as that model, in the mean absolute error over the
vocabulary (within 10%) and the largest (within 25%: one rounding of a
different kernel moves it). The precision an fp32 head buys instead is
measured per family by `make bench` (bench/head_dtype.py)."""
import pytest
import torch

from tests.conftest import free_engine, make_llm
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.models.language.pooling.test_splade import (
    TEXTS as SPLADE_TEXTS, save_random_splade, save_sparse_encoder)

FAMILIES = {
    "BertForMaskedLM": "BertSpladeSparseEmbeddingModel",
    "RobertaForMaskedLM": "RobertaSpladeSparseEmbeddingModel",
    "DistilBertForMaskedLM": "DistilBertSpladeSparseEmbeddingModel",
    "ModernBertForMaskedLM": "ModernBertSpladeSparseEmbeddingModel",
}
# The random checkpoints take 128 positions and spell most words out letter
# by letter: texts of under 60 characters fit.
TEXTS = SPLADE_TEXTS + [t for t in PARITY_TEXTS if len(t) < 60][:11]


def reference(path: str, dtype: torch.dtype) -> torch.Tensor:
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(path, device="cpu").to(dtype)
    return encoder.encode(TEXTS, convert_to_tensor=True,
                          batch_size=8).to_dense().float()


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    save_random_splade(str(root / "backbone"), request.param)
    path = str(root / "sparse-encoder")
    save_sparse_encoder(path, str(root / "backbone"), "max", "relu")
    return request.param, path, reference(path, torch.float32)


def test_compiled_bf16_engine_is_as_close_as_sentence_transformers(family):
    architecture, path, want = family
    llm = make_llm(path, hf_overrides=None, dtype="bfloat16",
                   enforce_eager=False, max_model_len=None)
    try:
        assert llm.model_config.architecture == FAMILIES[architecture]
        assert llm.llm_engine.vllm_config.compilation_config.mode > 0
        got = torch.tensor([o.outputs.embedding
                            for o in llm.embed(TEXTS, use_tqdm=False)])
    finally:
        free_engine(llm)
    ours = (got - want).abs()
    theirs = (reference(path, torch.bfloat16) - want).abs()
    print(f"\n{architecture} bf16 vs fp32 reference: max {ours.max():.3g} "
          f"(sentence-transformers bf16 {theirs.max():.3g}), mean "
          f"{ours.mean():.3g} ({theirs.mean():.3g})")
    assert ours.mean() <= 1.1 * theirs.mean()
    assert ours.max() <= 1.25 * theirs.max()
