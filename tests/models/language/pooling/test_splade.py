# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""SPLADE sparse embeddings: the pooler against the formula on real pooling
metadata, and the model against sentence-transformers' SparseEncoder.

The model tests run on a seeded random BertForMaskedLM built here (no
network needed) and on a pretrained SPLADE checkpoint, by default
naver/splade-cocondenser-ensembledistil; set VLLM_TEST_SPLADE_MODEL to a
local folder to run offline.
"""
import os

import pytest
import torch
from transformers import BertConfig

from vllm.model_executor.layers.pooler import DispatchPooler
from vllm.model_executor.models.bert import BertMLMHead, SpladeSparsePooler
from vllm.pooling_params import PoolingParams
from vllm.v1.pool.metadata import PoolingMetadata

PRETRAINED = os.environ.get("VLLM_TEST_SPLADE_MODEL",
                            "naver/splade-cocondenser-ensembledistil")
OVERRIDES = {"architectures": ["BertSpladeSparseEmbeddingModel"]}

TEXTS = [
    "what causes aging fast",
    "The capital of France is Paris.",
    "[CLS] tokens and [SEP] tokens count too",
    "SPLADE " * 60,
    "1 2 3 4 5 6 7 8 9 10",
]


def _head(vocab_size: int = 97, hidden_act: str = "gelu") -> BertMLMHead:
    config = BertConfig(hidden_size=16,
                        vocab_size=vocab_size,
                        hidden_act=hidden_act,
                        layer_norm_eps=1e-5)
    torch.manual_seed(0)
    head = BertMLMHead(config)
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return head


def _metadata(lens: list[int], tasks: list[str]) -> PoolingMetadata:
    meta = PoolingMetadata(
        prompt_lens=torch.tensor(lens),
        prompt_token_ids=None,
        pooling_params=[PoolingParams(task=t) for t in tasks],  # type: ignore
    )
    meta.build_pooling_cursor(lens, torch.device("cpu"))
    return meta


def _formula(head: BertMLMHead, hidden: torch.Tensor, lens: list[int],
             pooling: str) -> list[torch.Tensor]:
    out = []
    for seq in hidden.split(lens):
        weights = torch.log1p(torch.relu(head(seq)))
        out.append(weights.amax(0) if pooling == "max" else weights.sum(0))
    return out


@pytest.mark.parametrize("pooling", ["max", "sum"])
@pytest.mark.parametrize("chunk_bytes", [1, 3 * 97 * 4, 64 << 20])
def test_pooler_matches_formula(pooling: str, chunk_bytes: int):
    head = _head()
    lens = [1, 7, 2, 11, 4]
    hidden = torch.randn(sum(lens), 16)
    pooler = SpladeSparsePooler(head,
                                "embed",
                                pooling=pooling,
                                chunk_bytes=chunk_bytes)
    with torch.inference_mode():
        got = pooler(hidden, _metadata(lens, ["embed"] * len(lens)))
        want = _formula(head, hidden, lens, pooling)
    assert got.shape == (len(lens), 97)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_pooler_uses_cursor_offsets_in_mixed_batches():
    """DispatchPooler hands each sub-pooler the full flat hidden states."""
    head = _head(hidden_act="relu")
    lens = [3, 5, 2, 6, 4]
    tasks = ["encode", "embed", "embed", "encode", "embed"]
    hidden = torch.randn(sum(lens), 16)
    pooler = DispatchPooler({
        "embed":
        SpladeSparsePooler(head, "embed", chunk_bytes=4 * 97 * 4),
        "encode":
        SpladeSparsePooler(head, "encode", chunk_bytes=4 * 97 * 4),
    })
    with torch.inference_mode():
        got = pooler(hidden, _metadata(lens, tasks))
        pooled = _formula(head, hidden, lens, "max")
        per_token = [
            torch.log1p(torch.relu(head(seq))) for seq in hidden.split(lens)
        ]
    assert len(got) == len(lens)
    for task, g, p, t in zip(tasks, got, pooled, per_token):
        torch.testing.assert_close(g, p if task == "embed" else t)


def _save_random_splade(path: str) -> None:
    from transformers import BertForMaskedLM, BertTokenizerFast

    words = [
        "the", "a", "of", "to", "and", "in", "is", "was", "for", "on", "that",
        "with", "as", "by", "at", "from", "it", "what", "causes", "aging",
        "fast", "capital", "france", "paris", "tokens", "count", "too",
        "splade", "sparse", "vector", "model", "query", "passage"
    ]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += [str(i) for i in range(11)] + list("abcdefghijklmnopqrstuvwxyz")
    vocab += [w for w in words if w not in vocab]
    vocab += ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    BertTokenizerFast(os.path.join(path, "vocab.txt")).save_pretrained(path)

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab) + 3,
                        hidden_size=32,
                        num_hidden_layers=2,
                        num_attention_heads=4,
                        intermediate_size=64,
                        max_position_embeddings=128,
                        hidden_act="gelu_new",
                        layer_norm_eps=1e-6)
    model = BertForMaskedLM(config)
    model.save_pretrained(path)


@pytest.fixture(scope="module")
def random_splade(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("random-splade"))
    _save_random_splade(path)
    return path


def _sentence_transformers(model: str, texts: list[str]) -> torch.Tensor:
    from sentence_transformers import SparseEncoder

    encoder = SparseEncoder(model, device="cpu")
    return encoder.encode(texts, convert_to_tensor=True).to_dense().float()


def _vllm(model: str, texts: list[str]) -> torch.Tensor:
    from vllm import LLM

    llm = LLM(model=model,
              runner="pooling",
              dtype="float32",
              enforce_eager=True,
              hf_overrides=OVERRIDES)
    try:
        return torch.tensor([o.outputs.embedding for o in llm.embed(texts)])
    finally:
        del llm


@pytest.mark.parametrize("model", ["random", PRETRAINED])
def test_model_matches_sentence_transformers(model: str, random_splade: str,
                                             monkeypatch):
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    path = random_splade if model == "random" else model
    want = _sentence_transformers(path, TEXTS)
    got = _vllm(path, TEXTS)
    assert got.shape == want.shape
    for g, w in zip(got, want):
        assert torch.equal(g > 0, w > 0)
        torch.testing.assert_close(g, w, rtol=0, atol=1e-4)
