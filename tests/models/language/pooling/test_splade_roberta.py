# SPDX-License-Identifier: Apache-2.0
"""SPLADE on RoBERTa and XLM-RoBERTa backbones against SparseEncoder, on
seeded random checkpoints with tokenizers trained here, offline."""
import pytest
import torch

from tests.conftest import free_engine, make_llm, st_vectors, vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.models.language.pooling.test_splade_zero_flag import (
    _no_flags_vectors, assert_sparse_close)

ARCHITECTURE = "RobertaSpladeSparseEmbeddingModel"


def _has_roberta_splade() -> bool:
    from vllm import ModelRegistry
    return ARCHITECTURE in ModelRegistry.get_supported_archs()


pytestmark = pytest.mark.skipif(
    not _has_roberta_splade(),
    reason=f"{ARCHITECTURE} is not in this vLLM build's model registry yet: "
    "RoBERTa/XLM-R SPLADE is still being added to the series")

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def _save_random_roberta(path, xlm: bool):
    from tokenizers import ByteLevelBPETokenizer, SentencePieceUnigramTokenizer
    from transformers import (RobertaConfig, RobertaForMaskedLM,
                              RobertaTokenizerFast, XLMRobertaConfig,
                              XLMRobertaForMaskedLM, XLMRobertaTokenizerFast)
    if xlm:  # sentencepiece unigram, as XLM-R
        trainer = SentencePieceUnigramTokenizer()
        trainer.train_from_iterator(PARITY_TEXTS,
                                    vocab_size=400,
                                    special_tokens=SPECIALS,
                                    unk_token="<unk>")
        trainer.save(str(path / "tokenizer.json"))
        tok = XLMRobertaTokenizerFast(tokenizer_file=str(path /
                                                         "tokenizer.json"))
    else:  # byte-level BPE, as RoBERTa
        trainer = ByteLevelBPETokenizer()
        trainer.train_from_iterator(PARITY_TEXTS,
                                    vocab_size=400,
                                    special_tokens=SPECIALS)
        trainer.save_model(str(path))
        tok = RobertaTokenizerFast(str(path / "vocab.json"),
                                   str(path / "merges.txt"))
    tok.save_pretrained(path)
    torch.manual_seed(7)
    config_cls, model_cls = ((XLMRobertaConfig, XLMRobertaForMaskedLM)
                             if xlm else (RobertaConfig, RobertaForMaskedLM))
    config = config_cls(vocab_size=len(tok) + 5,
                        hidden_size=64,  # head_dim 32 (CPU attention)
                        num_hidden_layers=2,
                        num_attention_heads=2,
                        intermediate_size=96,
                        max_position_embeddings=514,
                        hidden_act="relu",
                        layer_norm_eps=1e-6,
                        pad_token_id=1)
    model = model_cls(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    model.save_pretrained(path)
    return [t for t in PARITY_TEXTS if len(tok(t)["input_ids"]) <= 500]


@pytest.mark.parametrize("xlm", [False, True], ids=["roberta", "xlm-roberta"])
def test_roberta_splade_matches_sentence_transformers(tmp_path, xlm):
    from sentence_transformers import SparseEncoder
    texts = _save_random_roberta(tmp_path, xlm)
    assert len(texts) >= 45
    want = st_vectors(SparseEncoder(str(tmp_path), device="cpu"), texts)

    llm = make_llm(str(tmp_path),
                   hf_overrides={"architectures": [ARCHITECTURE]})
    try:
        got = vllm_vectors(llm, texts)
    finally:
        free_engine(llm)
    assert_sparse_close(got, want, texts, "max")

    # Saved as a SparseEncoder, the same checkpoint needs no flags.
    saved = tmp_path / "sparse-encoder"
    SparseEncoder(str(tmp_path), device="cpu").save(str(saved))
    assert_sparse_close(_no_flags_vectors(str(saved), texts), want, texts,
                        "max")
