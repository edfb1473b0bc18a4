# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""BGE-M3's lexical weights on ``/embed_sparse``, against FlagEmbedding's
algorithm and against upstream's recipe (``/tokenize`` + ``/pooling``
``token_classify``, combined by token id), on a seeded random folder laid
out like BAAI/bge-m3: an XLMRobertaModel with ``sparse_linear.pt`` and
``colbert_linear.pt`` beside it, and a sentencepiece-style tokenizer."""

import json
from collections import defaultdict

import numpy as np
import pytest
import requests
import torch

from tests.utils import RemoteOpenAIServer

OVERRIDES = {"architectures": ["BgeM3EmbeddingModel"]}
TEXTS = [
    "What is BGE M3?",
    "Definition of BM25: BM25 is a bag-of-words retrieval function.",
    "the the the cat sat on the mat, the end",
    "symbols outside the vocabulary like \u2603 and \u2764",
]
# vLLM and transformers compute the same fp32 weights in another order; a
# weight this close to zero may be kept by one and dropped by the other.
ATOL = 1e-5


# BAAI/bge-m3's special tokens, and a tokenizer that numbers them otherwise
# and whose config names no BOS/EOS (so no row is dropped from its outputs).
VARIANTS = {
    "bge-m3": (["<s>", "<pad>", "</s>", "<unk>", "<mask>"], True),
    "other-special-ids": (["<unk>", "<mask>", "<pad>", "</s>", "<s>"], False),
}


def save_random_bge_m3(path: str, variant: str = "bge-m3") -> None:
    from tokenizers import SentencePieceUnigramTokenizer
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizerFast

    corpus = TEXTS[:-1] + [
        "BGE M3 supports dense retrieval, lexical matching and multi-vector.",
        "BM25 ranks documents by the query terms appearing in each document.",
    ]
    special_tokens, config_names_them = VARIANTS[variant]
    trainer = SentencePieceUnigramTokenizer()
    trainer.train_from_iterator(
        corpus,
        vocab_size=120,
        special_tokens=special_tokens,
        unk_token="<unk>",
    )
    trainer.save(f"{path}/tokenizer.json")
    tokenizer = XLMRobertaTokenizerFast(tokenizer_file=f"{path}/tokenizer.json")
    tokenizer.save_pretrained(path)

    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(tokenizer) + 3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=96,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id if config_names_them else None,
        eos_token_id=tokenizer.eos_token_id if config_names_them else None,
    )
    model = XLMRobertaModel(config, add_pooling_layer=False).eval()
    model.save_pretrained(path)
    sparse_linear = torch.nn.Linear(64, 1)
    torch.nn.init.normal_(sparse_linear.weight, std=0.5)
    torch.save(sparse_linear.state_dict(), f"{path}/sparse_linear.pt")
    torch.save(torch.nn.Linear(64, 64).state_dict(), f"{path}/colbert_linear.pt")


def flag_embedding_lexical_weights(path: str, texts: list[str]) -> list[dict]:
    """FlagEmbedding's BGEM3FlagModel lexical weights, line by line:
    relu(sparse_linear(last_hidden_state)) per token, then
    _process_token_weights: special tokens dropped, the max per token id."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, add_pooling_layer=False).eval()
    sparse_linear = torch.nn.Linear(64, 1)
    sparse_linear.load_state_dict(torch.load(f"{path}/sparse_linear.pt"))
    unused_tokens = {
        tokenizer.cls_token_id,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
    }
    results = []
    for text in texts:
        inputs = tokenizer([text], return_tensors="pt")
        with torch.inference_mode():
            last_hidden_state = model(**inputs).last_hidden_state
            token_weights = torch.relu(sparse_linear(last_hidden_state))
        result: dict[int, float] = defaultdict(int)
        for w, idx in zip(token_weights[0, :, 0].tolist(), inputs["input_ids"][0]):
            idx = int(idx)
            if idx not in unused_tokens and w > 0 and w > result[idx]:
                result[idx] = w
        results.append(dict(result))
    return results


def assert_same_terms(got: dict[int, float], want: dict[int, float]) -> None:
    for index in got.keys() | want.keys():
        g, w = got.get(index, 0.0), want.get(index, 0.0)
        assert abs(g - w) <= ATOL, (index, g, w)
    assert {i for i, w in want.items() if w > ATOL} <= got.keys()


@pytest.fixture(scope="module", params=list(VARIANTS))
def bge_m3(tmp_path_factory, request) -> str:
    path = str(tmp_path_factory.mktemp(request.param))
    save_random_bge_m3(path, request.param)
    return path


@pytest.fixture(scope="module")
def server(bge_m3: str):
    # Sparse mode as upstream documents it (--pooler-config.task
    # token_classify), so /pooling answers token_classify as well.
    args = [
        "--runner",
        "pooling",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--hf-overrides",
        json.dumps(OVERRIDES),
        "--pooler-config.task",
        "token_classify",
    ]
    with RemoteOpenAIServer(bge_m3, args) as remote_server:
        yield remote_server


def _embed_sparse(server: RemoteOpenAIServer, **body) -> list[dict[int, float]]:
    response = requests.post(server.url_for("embed_sparse"), json=body)
    response.raise_for_status()
    return [{t["index"]: t["value"] for t in terms} for terms in response.json()]


def test_embed_sparse_matches_flag_embedding(server, bge_m3):
    from transformers import AutoTokenizer

    got = _embed_sparse(server, inputs=TEXTS)
    want = flag_embedding_lexical_weights(bge_m3, TEXTS)
    assert len(got) == len(want) == len(TEXTS)
    for g, w in zip(got, want):
        assert_same_terms(g, w)
        assert list(g) == sorted(g)  # by index, as TEI
    # The special tokens are left out, whatever their ids.
    tokenizer = AutoTokenizer.from_pretrained(bge_m3)
    special = set(tokenizer.all_special_ids)
    assert all(special.isdisjoint(terms) for terms in got)


def test_embed_sparse_matches_upstream_recipe(server, bge_m3):
    """/tokenize + /pooling token_classify, combined by token id as
    tests/models/language/pooling/test_bge_m3.py does."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(bge_m3)
    # What FlagEmbedding drops (the rows of <s> and </s> are dropped
    # already where the config names them).
    unused = {
        tokenizer.cls_token_id,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
    }
    got = _embed_sparse(server, inputs=TEXTS)
    for text, terms in zip(TEXTS, got):
        tokens = requests.post(
            server.url_for("tokenize"),
            json={"model": server_model(server), "prompt": text},
        ).json()["tokens"]
        pooled = requests.post(
            server.url_for("pooling"),
            json={
                "model": server_model(server),
                "task": "token_classify",
                "input": text,
            },
        ).json()["data"][0]["data"]
        weights = np.asarray(pooled, dtype=np.float32).reshape(-1)
        # The rows, without <s> and </s> where the config names them.
        ids = tokens[1:-1] if len(tokens) - len(weights) == 2 else tokens
        assert len(ids) == len(weights)
        recipe: dict[int, float] = {}
        for token_id, weight in zip(ids, weights.tolist()):
            if weight > 0:
                recipe[token_id] = max(weight, recipe.get(token_id, 0.0))
        for token_id in unused:
            recipe.pop(token_id, None)
        assert_same_terms(terms, recipe)


def server_model(server: RemoteOpenAIServer) -> str:
    return requests.get(server.url_for("v1/models")).json()["data"][0]["id"]


def test_offline_dense_embed_is_unchanged(vllm_runner, bge_m3):
    """The dense vector stays the normalised [CLS] state."""
    from transformers import AutoModel, AutoTokenizer

    from vllm.config import PoolerConfig

    with vllm_runner(
        bge_m3,
        runner="pooling",
        dtype="float32",
        max_model_len=None,
        hf_overrides=OVERRIDES,
        pooler_config=PoolerConfig(task="embed"),
    ) as vllm_model:
        got = torch.tensor(vllm_model.embed(TEXTS))
    tokenizer = AutoTokenizer.from_pretrained(bge_m3)
    model = AutoModel.from_pretrained(bge_m3, add_pooling_layer=False).eval()
    with torch.inference_mode():
        inputs = tokenizer(TEXTS, return_tensors="pt", padding=True)
        cls = model(**inputs).last_hidden_state[:, 0]
    want = torch.nn.functional.normalize(cls, dim=-1)
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL)


def test_rows_of_token_ids():
    """Each output row's token id, as BOSEOSFilter leaves the rows; an
    output that cannot be one weight per token is a clear error."""
    from vllm_splade.embed_sparse.io_processor import (
        EmbedSparseIOProcessor,
    )
    from vllm.exceptions import VLLMServerError

    processor = object.__new__(EmbedSparseIOProcessor)
    processor.task = "token_classify"
    processor.bos_token_id, processor.eos_token_id = 0, 2
    assert processor._rows_of([0, 7, 8, 2], 2) == [7, 8]
    assert processor._rows_of([0, 7, 8], 2) == [7, 8]  # no EOS at the end
    assert processor._rows_of([5, 7, 8, 6], 4) == [5, 7, 8, 6]  # other ids
    processor.bos_token_id = processor.eos_token_id = None
    assert processor._rows_of([0, 7, 2], 3) == [0, 7, 2]
    with pytest.raises(VLLMServerError, match="3 rows for 2 prompt tokens"):
        processor._rows_of([7, 8], 3)
