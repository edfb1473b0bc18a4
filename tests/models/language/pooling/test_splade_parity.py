# SPDX-License-Identifier: Apache-2.0
"""The patched vLLM against its references on real and synthetic
checkpoints: sentence-transformers' SparseEncoder, HF transformers and the
SPLADE formula."""
import pytest
import torch

from tests.conftest import (engine_start_error, free_engine, make_llm, st_vectors,
                            vllm_vectors)
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SPLADE_OVERRIDES

TOL = 1e-5


@pytest.fixture(scope="module")
def splade_tiny_reference(splade_st):
    return st_vectors(splade_st, PARITY_TEXTS)


@pytest.fixture(scope="module")
def splade_tiny_vllm(splade_llm):
    return vllm_vectors(splade_llm, PARITY_TEXTS)


def test_text_set_covers_the_length_range(splade_st):
    lens = [len(splade_st.tokenizer(t)["input_ids"]) for t in PARITY_TEXTS]
    assert len(PARITY_TEXTS) >= 50
    assert min(lens) <= 3 and 480 <= max(lens) <= 512


def test_trained_checkpoint_matches_sentence_transformers(
        splade_tiny_vllm, splade_tiny_reference):
    got, want = splade_tiny_vllm, splade_tiny_reference
    assert got.shape == want.shape == (len(PARITY_TEXTS), 30522)
    nnz = (want > 0).sum(1).tolist()
    print(f"\nnnz per text (min {min(nnz)}, max {max(nnz)}): {nnz}")
    worst = (got - want).abs().max().item()
    print(f"max abs difference over {len(PARITY_TEXTS)} texts: {worst:.3g}")
    for text, g, w in zip(PARITY_TEXTS, got, want):
        assert torch.equal(g > 0, w > 0), f"non-zero terms differ: {text!r}"
        assert (g - w).abs().max().item() <= TOL, text
    # It is a real SPLADE model: sparse, and it expands queries.
    assert max(nnz) < 1000


def test_batch_equals_one_by_one(splade_llm, splade_tiny_vllm):
    # Very different lengths in one call vs each text alone.
    picks = [0, 6, 45, 50, 3, 49, 10]
    alone = torch.cat(
        [vllm_vectors(splade_llm, [PARITY_TEXTS[i]]) for i in picks])
    batched = splade_tiny_vllm[picks]
    # Same terms; weights equal up to fp32 GEMM blocking differences.
    assert torch.equal(alone > 0, batched > 0)
    torch.testing.assert_close(alone, batched, rtol=0, atol=TOL)


# bf16 against the fp32 reference, by head dtype (None: the default, the
# model's); see test_bf16_engine_stays_close.
BF16_BOUNDS = {
    None: dict(max_abs=0.15, near_zero=0.08, flipped_share=0.04,
               min_cosine=0.997),
    "float32": dict(max_abs=0.1, near_zero=0.05, flipped_share=0.02,
                    min_cosine=0.999),
}


@pytest.mark.parametrize("head_dtype", list(BF16_BOUNDS))
def test_bf16_engine_stays_close(head_dtype, splade_tiny, splade_tiny_reference):
    """dtype="bfloat16" runs the encoder in bf16 and the SPLADE head in the
    model's dtype too, unless head_dtype says otherwise. Against the fp32
    sentence-transformers reference, on the 53 parity texts (3,064 reference
    non-zeros), this build measured (2-core AMD EPYC):

    - head in bf16 (the default, as sentence-transformers' own bf16 model
      runs it): max abs difference 0.066 (the largest weights are ~3), 72
      terms in 20 texts active on one side only, each below 0.048 on both
      sides, cosine >= 0.9986;
    - head in fp32 ({"head_dtype": "float32"}): max abs 0.054, 38 terms in
      12 texts, each below 0.021, cosine >= 0.99974: half the near-zero
      flips. Flipped terms sit at zero to bf16's precision (8 significant
      bits, relative step 2^-8) where a logit lands on either side of the
      relu.

    Bounds, about twice what was measured so that a different CPU's bf16
    kernels pass, and tight enough to catch a real bug (a wrong activation
    or dropped bias is off by > 0.5, a wrong pooling by far more): the
    largest difference, the weight below which a term may be active on one
    side only, the share of flipped terms, the lowest cosine.
    """
    import torch.nn.functional as F

    from vllm.model_executor.models.masked_lm import masked_lm_head_dtype
    bounds = BF16_BOUNDS[head_dtype]
    overrides = dict(SPLADE_OVERRIDES)
    if head_dtype is not None:
        overrides["head_dtype"] = head_dtype
    llm = make_llm(splade_tiny, dtype="bfloat16", hf_overrides=overrides)
    try:
        head = masked_lm_head_dtype(llm.llm_engine.model_config)
        got = vllm_vectors(llm, PARITY_TEXTS).float()
    finally:
        free_engine(llm)
    assert head == (torch.float32 if head_dtype else torch.bfloat16)
    want = splade_tiny_reference
    assert got.shape == want.shape
    diff = (got - want).abs()
    flipped = (got > 0) != (want > 0)
    cosine = F.cosine_similarity(got, want, dim=1)
    n_flipped, nnz = int(flipped.sum()), int((want > 0).sum())
    print(f"\nbf16 (head {head_dtype or 'bf16'}) vs fp32 reference: max abs "
          f"diff {diff.max().item():.3g}; {n_flipped} of {nnz} terms flipped "
          f"in {int(flipped.any(1).sum())} texts, the largest "
          f"{torch.maximum(got, want)[flipped].max().item() if n_flipped else 0:.3g}; "
          f"min cosine {cosine.min().item():.6f}")
    assert diff.max().item() <= bounds["max_abs"]
    assert (torch.maximum(got, want)[flipped] < bounds["near_zero"]).all()
    assert n_flipped <= bounds["flipped_share"] * nnz
    assert (cosine >= bounds["min_cosine"]).all()


def _save_synthetic_bert(path, *, masked_lm: bool):
    """A seeded random BERT with a WordPiece tokenizer built offline."""
    from transformers import (BertConfig, BertForMaskedLM, BertModel,
                              BertTokenizerFast)
    words = sorted({w.strip(".,?!'").lower()
                    for t in PARITY_TEXTS[:45] for w in t.split()} - {""})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    vocab += [c for c in "abcdefghijklmnopqrstuvwxyz0123456789"
              if c not in vocab]
    vocab += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(str(path / "vocab.txt")).save_pretrained(path)
    torch.manual_seed(1234)
    config = BertConfig(vocab_size=len(vocab) + 7,
                        # head_dim 32: vLLM's CPU attention has no kernel
                        # for small odd sizes such as 12.
                        hidden_size=64,
                        num_hidden_layers=3,
                        num_attention_heads=2,
                        intermediate_size=96,
                        max_position_embeddings=256,
                        hidden_act="relu",
                        layer_norm_eps=1e-7,
                        tie_word_embeddings=not masked_lm)
    model = (BertForMaskedLM if masked_lm else BertModel)(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)  # Sharper than the default init.
    model.save_pretrained(path)
    return model


def test_synthetic_untied_checkpoint_matches_hf(tmp_path):
    """Untied decoder, relu, vocab != 30522, layer_norm_eps != 1e-12."""
    hf = _save_synthetic_bert(tmp_path, masked_lm=True)
    assert not torch.equal(hf.cls.predictions.decoder.weight,
                           hf.bert.embeddings.word_embeddings.weight)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tmp_path)
    texts = PARITY_TEXTS[:45]
    want = []
    with torch.no_grad():
        for t in texts:
            logits = hf(**tok(t, return_tensors="pt")).logits[0]
            want.append(torch.log1p(torch.relu(logits)).amax(0))
    llm = make_llm(str(tmp_path))
    try:
        got = vllm_vectors(llm, texts)
    finally:
        free_engine(llm)
    want = torch.stack(want)
    assert got.shape == (len(texts), hf.config.vocab_size)
    for text, g, w in zip(texts, got, want):
        assert (g - w).abs().max().item() <= TOL, text
        # This random relu model puts some logits at zero to within fp32
        # rounding: a term may be active on one side only if it is below
        # TOL on both.
        flipped = (g > 0) != (w > 0)
        assert (torch.maximum(g, w)[flipped] <= TOL).all(), text


def test_dense_bert_model_still_embeds_as_before(tmp_path):
    """No regression: BertModel keeps CLS pooling + normalisation."""
    hf = _save_synthetic_bert(tmp_path, masked_lm=False)
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tmp_path)
    texts = PARITY_TEXTS[:20]
    with torch.no_grad():
        want = torch.stack([
            torch.nn.functional.normalize(
                hf(**tok(t, return_tensors="pt")).last_hidden_state[0, 0],
                dim=-1) for t in texts
        ])
    llm = make_llm(str(tmp_path), hf_overrides=None)
    try:
        got = vllm_vectors(llm, texts)
    finally:
        free_engine(llm)
    assert got.shape == (len(texts), 64)
    torch.testing.assert_close(got, want, rtol=0, atol=TOL)


def test_checkpoint_without_mlm_head_fails_clearly(tmp_path):
    """A BertModel checkpoint forced to SPLADE: vLLM's loader names the
    head weights it did not get (vLLM's names for cls.predictions.*)."""
    _save_synthetic_bert(tmp_path, masked_lm=False)
    message = engine_start_error(str(tmp_path))
    assert "not initialized from checkpoint" in message, message
    for name in ("mlm_head.dense.weight", "mlm_head.decoder.bias"):
        assert name in message, message
