# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project

from unittest.mock import MagicMock, patch

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from vllm.model_executor.models import masked_lm, splade, splade_pooling
from vllm.model_executor.models.masked_lm import BertMLMHead, masked_lm_head_dtype
from vllm.model_executor.models.splade import SparseStaticEmbedding, SPLADESparsePooler
from vllm.pooling_params import PoolingParams
from vllm.v1.pool.late_interaction_runner import LateInteractionRunner
from vllm.v1.pool.metadata import PoolingMetadata, PoolingStates
from vllm.v1.token_buffer import TokenBuffer
from vllm.v1.worker.gpu.input_batch import InputBatch
from vllm.v1.worker.gpu.model_runner import GPUModelRunner
from vllm.v1.worker.gpu.pool.pooling_runner import PoolingRunner
from vllm.v1.worker.gpu.states import RequestState

# ---------------------------------------------------------------------
# Functional test: SPLADE formula correctness (no HF download needed)
# ---------------------------------------------------------------------


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.usefixtures("default_vllm_config")
@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new", "relu"])
@torch.inference_mode()
def test_mlm_head_matches_transformers(hidden_act: str):
    """BertMLMHead gives transformers' masked-LM logits, with the
    checkpoint's activation, run in its own dtype whatever the input's."""
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLMPredictionHead

    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=16, vocab_size=11, hidden_act=hidden_act, layer_norm_eps=1e-6
    )
    reference = BertLMPredictionHead(config).eval()
    for p in reference.parameters():
        nn.init.normal_(p)
    head = BertMLMHead.from_config(config, dtype=torch.float32)
    head.dense.load_state_dict(reference.transform.dense.state_dict())
    head.layer_norm.load_state_dict(reference.transform.LayerNorm.state_dict())
    head.decoder.weight.copy_(reference.decoder.weight)
    head.decoder.bias.copy_(reference.decoder.bias)

    hidden_states = torch.randn(4, 16)
    torch.testing.assert_close(head(hidden_states), reference(hidden_states))
    assert head(hidden_states.bfloat16()).dtype == torch.float32


@pytest.mark.core_model
@pytest.mark.cpu_model
def test_mlm_head_runs_in_the_model_dtype_unless_head_dtype_is_set():
    """The masked-LM head takes the model's dtype, not the fp32 default of
    vLLM's pooling heads; an explicit head_dtype is honoured."""
    from types import SimpleNamespace

    model_config = SimpleNamespace(
        hf_config=SimpleNamespace(), dtype=torch.bfloat16, head_dtype=torch.float32
    )
    assert masked_lm_head_dtype(model_config) == torch.bfloat16  # type: ignore[arg-type]
    model_config.hf_config.head_dtype = "float32"
    assert masked_lm_head_dtype(model_config) == torch.float32  # type: ignore[arg-type]


class _VocabShard(nn.Module):
    """Rank 1 of 2 of a vocab-parallel embedding: the second half of the
    rows, loaded by its weight_loader from the whole checkpoint tensor."""

    def __init__(self, vocab_size: int, hidden_size: int):
        super().__init__()
        half = vocab_size // 2
        self.weight = nn.Parameter(torch.empty(half, hidden_size))
        self.weight.weight_loader = lambda param, w: param.data.copy_(w[half:])


@pytest.mark.core_model
@pytest.mark.cpu_model
@torch.inference_mode()
def test_tied_decoder_loads_from_the_checkpoint_not_the_shard():
    """At TP>1 the word embeddings are vocab-parallel, but the masked-LM
    decoder tied to them is replicated: it loads the checkpoint's whole
    tensor, not the rank's shard of the rows."""
    from vllm.model_executor.models.utils import WeightsMapper

    torch.manual_seed(0)
    model = nn.Module()
    model.embeddings = _VocabShard(8, 4)
    model.mlm_head = nn.Module()
    model.mlm_head.decoder = nn.Linear(4, 8)
    weights = {"embeddings.weight": torch.randn(8, 4), "decoder.bias": torch.randn(8)}
    mapper = WeightsMapper(orig_to_new_prefix={"decoder.": "mlm_head.decoder."})

    loaded = masked_lm.load_masked_lm_weights(
        model, mapper.apply(weights.items()), "embeddings.weight"
    )
    assert loaded == {
        "embeddings.weight",
        "mlm_head.decoder.weight",
        "mlm_head.decoder.bias",
    }
    assert torch.equal(model.mlm_head.decoder.weight, weights["embeddings.weight"])
    assert torch.equal(model.embeddings.weight, weights["embeddings.weight"][4:])
    # Without the embeddings there is nothing to tie, nor for an untied
    # model: the loader's check of what is missing names the decoder.
    loaded = masked_lm.load_masked_lm_weights(
        model,
        mapper.apply([("decoder.bias", weights["decoder.bias"])]),
        "embeddings.weight",
    )
    assert loaded == {"mlm_head.decoder.bias"}
    loaded = masked_lm.load_masked_lm_weights(
        model,
        mapper.apply(weights.items()),
        "embeddings.weight",
        tie_word_embeddings=False,
    )
    assert loaded == {"embeddings.weight", "mlm_head.decoder.bias"}


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.parametrize("tie_word_embeddings", [True, False])
@pytest.mark.parametrize(
    "present",
    [
        tuple(
            n
            for i, n in enumerate(("bias", "decoder.weight", "decoder.bias"))
            if k >> i & 1
        )
        for k in range(8)
    ],
)
@pytest.mark.parametrize("reverse", [False, True])
@torch.inference_mode()
def test_masked_lm_decoder_is_tied_as_transformers_ties_it(
    tmp_path, tie_word_embeddings, present, reverse
):
    """Whatever decoder tensors a BERT checkpoint carries, in whatever
    order, the decoder gets those that transformers' BertForMaskedLM loads:
    its own where present, else, when tied, the word embeddings and
    `cls.predictions.bias`."""
    from safetensors.torch import save_file
    from transformers import BertConfig
    from transformers import BertForMaskedLM as HfBertForMaskedLM

    from vllm.model_executor.models.bert import BertForMaskedLM
    from vllm.model_executor.models.masked_lm import load_masked_lm_weights

    config = BertConfig(
        vocab_size=16,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=16,
        tie_word_embeddings=tie_word_embeddings,
    )
    torch.manual_seed(0)
    state = {
        k: v
        for k, v in HfBertForMaskedLM(config).state_dict().items()
        if not k.startswith("cls.predictions.") or k.startswith("cls.predictions.t")
    }
    for i, name in enumerate(present):
        shape = (16, 8) if name == "decoder.weight" else (16,)
        state[f"cls.predictions.{name}"] = torch.full(shape, float(i + 2))
    config.save_pretrained(tmp_path)
    save_file(
        {k: v.contiguous() for k, v in state.items()}, tmp_path / "model.safetensors"
    )
    hf = HfBertForMaskedLM.from_pretrained(tmp_path).cls.predictions.decoder

    model = nn.Module()
    model.bert = nn.Module()
    model.bert.embeddings = nn.Module()
    model.bert.embeddings.word_embeddings = nn.Embedding(16, 8)
    model.mlm_head = nn.Module()
    model.mlm_head.decoder = nn.Linear(8, 16)
    weights = [
        (k, v)
        for k, v in state.items()
        if k.startswith(("bert.embeddings.word_embeddings.", "cls.predictions."))
        and not k.startswith("cls.predictions.t")
    ]
    loaded = load_masked_lm_weights(
        model,
        BertForMaskedLM.hf_to_vllm_mapper.apply(weights[::-1] if reverse else weights),
        "bert.embeddings.word_embeddings.weight",
        tie_word_embeddings,
    )
    decoder = model.mlm_head.decoder
    if tie_word_embeddings or "decoder.weight" in present:
        assert torch.equal(decoder.weight, hf.weight)
    else:  # transformers leaves it initialised at random; the loader refuses
        assert "mlm_head.decoder.weight" not in loaded
    if "decoder.bias" in present or (tie_word_embeddings and "bias" in present):
        assert torch.equal(decoder.bias, hf.bias)
    else:  # transformers leaves it initialised; the loader refuses
        assert "mlm_head.decoder.bias" not in loaded


def _metadata(lens: list[int]) -> PoolingMetadata:
    meta = PoolingMetadata(
        prompt_lens=torch.tensor(lens, dtype=torch.int32),
        prompt_token_ids=None,
        prompt_token_ids_cpu=None,
        pooling_params=[PoolingParams(task="embed") for _ in lens],
        pooling_states=[PoolingStates() for _ in lens],
    )
    meta.build_pooling_cursor(
        np.array(lens), torch.tensor(lens, dtype=torch.int32), torch.device("cpu")
    )
    return meta


def _random_head(hidden_size: int, vocab_size: int) -> BertMLMHead:
    mlm_head = BertMLMHead(
        hidden_size=hidden_size, vocab_size=vocab_size, layer_norm_eps=1e-12
    )
    for p in mlm_head.parameters():
        nn.init.normal_(p)
    return mlm_head


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.usefixtures("default_vllm_config")
@pytest.mark.parametrize("pooling", ["max", "sum"])
@pytest.mark.parametrize("activation", ["relu", "log1p_relu"])
@pytest.mark.parametrize("block_bytes", [1, None])
@pytest.mark.parametrize("reduce_with", ["scatter_reduce", "segment_reduce"])
@torch.inference_mode()
def test_splade_pooler_matches_reference_formula(
    pooling: str,
    activation: str,
    block_bytes: int | None,
    reduce_with: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """SPLADESparsePooler gives log1p(relu(mlm_head(h))) (log1p of that for
    log1p_relu) pooled over all the tokens of each sequence, [CLS] and [SEP]
    included, in one block of vocabulary columns or several, with either
    reduction."""
    monkeypatch.setattr(
        splade, "_reduces_with_scatter", lambda _: reduce_with == "scatter_reduce"
    )
    torch.manual_seed(0)
    H, V = 5, 600  # block_bytes=1: blocks of 256, 256 and 88 columns
    lens = [3, 1, 6, 2]
    hidden_states = torch.randn(sum(lens), H)
    mlm_head = _random_head(H, V)

    pooler = SPLADESparsePooler(
        mlm_head, pooling=pooling, activation=activation, block_bytes=block_bytes
    )
    # Rows past the batch's tokens (padding) are not pooled.
    padded = torch.cat([hidden_states, torch.full((2, H), 1e4)])
    pooled = pooler(padded, _metadata(lens))

    assert pooled.shape == (len(lens), V)
    assert (pooled >= 0).all(), "SPLADE outputs must be non-negative."
    for got, hs in zip(pooled, hidden_states.split(lens)):
        scores = torch.log1p(torch.relu(mlm_head(hs)))
        if activation == "log1p_relu":
            scores = torch.log1p(scores)
        want = scores.amax(0) if pooling == "max" else scores.sum(0)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # Deterministic: no atomics in either reduction.
    assert torch.equal(pooler(padded, _metadata(lens)), pooled)
    assert pooler(hidden_states[:0], _metadata([])).shape == (0, V)


@pytest.mark.core_model
@pytest.mark.cpu_model
def test_reduction_offsets_chunk_long_sequences():
    """Sequences longer than a chunk are reduced in chunks of one sequence,
    then each sequence's chunks; shorter ones in one level."""
    lens = torch.tensor([3, 1, 6])
    assert splade_pooling.reduction_offsets(lens, 6).tolist() == [0, 3, 4, 10]
    # Chunks of 2 tokens: [2, 1], [1], [2, 2, 2]; then 2, 1 and 3 chunks.
    chunks, seqs = [0, 2, 3, 4, 6, 8, 10], [0, 2, 3, 6]
    assert splade_pooling.reduction_offsets(lens, 2).tolist() == chunks + seqs


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.usefixtures("default_vllm_config")
@pytest.mark.parametrize(
    "pooling,dtype,bound",
    [
        ("sum", torch.float32, 1e-5),
        ("sum", torch.float16, 5e-5),
        ("sum", torch.bfloat16, 3e-4),
        # On CPU the maxima are of logits rounded to the model's dtype.
        ("max", torch.float32, 1e-5),
        ("max", torch.float16, 1e-3),
        ("max", torch.bfloat16, 5e-3),
    ],
)
@pytest.mark.parametrize("reduce_with", ["scatter_reduce", "segment_reduce"])
@torch.inference_mode()
def test_splade_pooler_accumulates_in_fp32(
    pooling: str,
    dtype: torch.dtype,
    bound: float,
    reduce_with: str,
    monkeypatch: pytest.MonkeyPatch,
):
    """With the head in fp16 or bf16, 2,048 tokens pool to within `bound`
    (of the largest weight) of fp64 on the same operands, with either
    reduction: activation and sums are fp32. (Summed in bf16, segment_reduce
    was 51% off and scatter_reduce 0.4%.) Sequences longer than a chunk are
    reduced in two levels."""
    monkeypatch.setattr(
        splade, "_reduces_with_scatter", lambda _: reduce_with == "scatter_reduce"
    )
    torch.manual_seed(0)
    H, V = 64, 3000
    lens = [700, 1348]
    mlm_head = BertMLMHead(hidden_size=H, vocab_size=V, dtype=dtype)
    nn.init.normal_(mlm_head.decoder.weight, std=0.15)
    nn.init.normal_(mlm_head.decoder.bias, mean=-0.5, std=0.5)
    hidden_states = torch.randn(sum(lens), H, dtype=dtype)
    pooler = SPLADESparsePooler(mlm_head, pooling=pooling)
    pooled = pooler(hidden_states, _metadata(lens))

    decoder = mlm_head.decoder
    logits = mlm_head.transform(hidden_states).double() @ decoder.weight.double().t()
    scores = torch.log1p(torch.relu(logits + decoder.bias.double()))
    want = torch.stack(
        [s.amax(0) if pooling == "max" else s.sum(0) for s in scores.split(lens)]
    )
    assert pooled.dtype == torch.float32
    assert (pooled.double() - want).abs().max() <= bound * want.max()


class _RecordOps(TorchDispatchMode):
    """Records the aten ops a forward dispatches, with their arguments."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, tuple, dict]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.calls.append((str(func.overloadpacket.__name__), args, kwargs))
        return func(*args, **kwargs)


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.usefixtures("default_vllm_config")
@pytest.mark.parametrize("pooling", ["max", "sum"])
@pytest.mark.parametrize("lens,levels", [([3, 1, 6, 2], 1), ([300, 3], 2)])
@torch.inference_mode()
def test_splade_pooler_never_syncs_with_the_device(
    pooling: str, lens: list[int], levels: int
):
    """On an accelerator, forward copies the sequence offsets to the device
    once, asynchronously, and reads nothing back: on the meta device any
    read back would fail. segment_reduce must run unsafe, or it checks the
    lengths on the host (two syncs per call on CUDA). A sequence past a chunk
    is reduced in two levels, from the same one copy."""
    H, V = 8, 600
    with torch.device("meta"):
        mlm_head = BertMLMHead(hidden_size=H, vocab_size=V)
        hidden_states = torch.empty(sum(lens), H)
    pooler = SPLADESparsePooler(mlm_head, pooling=pooling, block_bytes=1)
    metadata = _metadata(lens)
    with _RecordOps() as ops:
        pooled = pooler(hidden_states, metadata)
    assert pooled.shape == (len(lens), V) and pooled.is_meta

    segment_reduces = [kw for name, _, kw in ops.calls if name == "segment_reduce"]
    # One per level, per block of 256 columns.
    assert len(segment_reduces) == 3 * levels
    assert all(kw.get("unsafe") for kw in segment_reduces)
    to_device = [
        args
        for name, args, kw in ops.calls
        if name in ("to", "_to_copy", "copy_")
        and any(isinstance(a, torch.Tensor) and not a.is_meta for a in args)
    ]
    assert len(to_device) == 1, "the offsets go to the device once per call"


def _routed_metadata(lens: list[int], routes: list[str], token_ids: torch.Tensor):
    meta = _metadata(lens)
    meta.pooling_params = [PoolingParams(task="embed", route=r) for r in routes]
    meta.prompt_token_ids_cpu = token_ids
    return meta


def _static_embedding(vocab_size: int) -> SparseStaticEmbedding:
    table = SparseStaticEmbedding(vocab_size, torch.float32, "query table")
    table.weight.data = torch.rand(vocab_size) * (torch.rand(vocab_size) > 0.3)
    return table


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.usefixtures("default_vllm_config")
@torch.inference_mode()
def test_splade_pooler_static_routes():
    """A static route's vector is its table's weight of each token present
    (sentence-transformers' SparseStaticEmbedding), whatever the hidden
    states; the other sequences of the step pool as they would alone."""
    torch.manual_seed(0)
    H, V = 5, 600
    lens = [3, 1, 6, 2]
    routes = ["query", "document", "document", "query"]
    token_ids = torch.zeros(len(lens), max(lens), dtype=torch.int64)
    for i, n in enumerate(lens):
        token_ids[i, :n] = torch.randint(1, V, (n,))
    token_ids[0, :3] = torch.tensor([7, 9, 7])  # repeated: counted once
    hidden_states = torch.randn(sum(lens), H)
    table = _static_embedding(V)
    pooler = SPLADESparsePooler(
        _random_head(H, V),
        block_bytes=1,
        static_embedding=table,
        static_routes={"query"},
    )
    assert pooler.get_pooling_updates("embed").requires_token_ids

    pooled = pooler(hidden_states, _routed_metadata(lens, routes, token_ids))

    # The model rows go through the pooler as a copy of their hidden states;
    # so does this, as an offset view can take another GEMM path (1 ulp).
    alone = pooler(hidden_states[3:10].clone(), _metadata([1, 6]))
    torch.testing.assert_close(pooled[1:3], alone, rtol=0, atol=0)
    for row in (0, 3):
        want = torch.zeros(V)
        ids = token_ids[row, : lens[row]]
        want[ids] = table.weight[ids]
        torch.testing.assert_close(pooled[row], want, rtol=0, atol=0)
    # A step of static routes only reads no hidden states at all.
    only = pooler(
        hidden_states[:0],
        _routed_metadata([3, 2], ["query", "query"], token_ids[[0, 3]]),
    )
    torch.testing.assert_close(only, pooled[[0, 3]], rtol=0, atol=0)


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.usefixtures("default_vllm_config")
@torch.inference_mode()
def test_splade_pooler_static_routes_never_sync():
    """Mixed routes on the meta device: every index goes to the device
    asynchronously, nothing is read back."""
    H, V = 8, 600
    lens = [3, 1, 6, 2]
    with torch.device("meta"):
        mlm_head = BertMLMHead(hidden_size=H, vocab_size=V)
        table = SparseStaticEmbedding(V, torch.float32, "query table")
        hidden_states = torch.empty(sum(lens), H)
    pooler = SPLADESparsePooler(
        mlm_head, block_bytes=1, static_embedding=table, static_routes={"query"}
    )
    token_ids = torch.ones(len(lens), max(lens), dtype=torch.int64)
    metadata = _routed_metadata(
        lens, ["query", "document", "query", "document"], token_ids
    )
    with _RecordOps() as ops:
        pooled = pooler(hidden_states, metadata)
    assert pooled.shape == (len(lens), V) and pooled.is_meta
    to_device = [
        any(a is True for a in args[1:]) or kw.get("non_blocking") is True
        for name, args, kw in ops.calls
        if name in ("to", "_to_copy")
        and not args[0].is_meta
        and "meta" in str((args[1:], kw.get("device")))
    ]
    # Token ids, lengths, both row sets, the model rows' tokens, the offsets.
    assert len(to_device) == 6 and all(to_device), to_device


@pytest.mark.core_model
@pytest.mark.cpu_model
def test_sparse_static_embedding_loads_one_weight_per_token():
    """One weight per token of the tokenizer, or per id of the model's padded
    vocabulary (the ids past the tokenizer's weigh nothing); a table smaller
    than the tokenizer or larger than the vocabulary is refused."""
    table = SparseStaticEmbedding(600, torch.float32, "The table in q/", 598)
    table.weight.weight_loader(table.weight, torch.ones(598))
    assert table.weight.sum() == 598 and table.weight[598:].eq(0).all()
    table.weight.weight_loader(table.weight, torch.ones(600))
    assert table.weight.sum() == 600
    for size in (597, 601):
        with pytest.raises(ValueError, match=rf"The table in q/ holds \({size},\)"):
            table.weight.weight_loader(table.weight, torch.zeros(size))


@pytest.mark.core_model
@pytest.mark.cpu_model
@pytest.mark.usefixtures("default_vllm_config")
def test_splade_pooler_refuses_unknown_pooling():
    mlm_head = BertMLMHead(hidden_size=5, vocab_size=7)
    with pytest.raises(ValueError, match="SPLADE pooling must be 'max' or 'sum'"):
        SPLADESparsePooler(mlm_head, pooling="mean")
    with pytest.raises(ValueError, match="must be 'relu' or 'log1p_relu'"):
        SPLADESparsePooler(mlm_head, activation="gelu")


def test_pooling_runner_gathers_required_token_ids() -> None:
    runner = PoolingRunner.__new__(PoolingRunner)
    pooling_params = PoolingParams(task="embed", requires_token_ids=True)
    runner.pooling_params = {1: pooling_params, 3: pooling_params}
    runner.pooling_states = {1: PoolingStates(), 3: PoolingStates()}
    runner.prompt_token_ids = {
        1: torch.tensor([101, 102]),
        3: torch.tensor([101, 11, 102]),
    }

    input_batch = MagicMock(spec=InputBatch)
    input_batch.idx_mapping_np = np.array([3, 1], dtype=np.int32)
    input_batch.num_reqs = 2
    req_states = MagicMock(spec=RequestState)
    req_states.prompt_len = MagicMock(np=np.array([0, 2, 0, 3], dtype=np.int32))
    metadata = runner._get_pooling_metadata(
        input_batch, req_states, torch.device("cpu")
    )

    expected = torch.tensor([[101, 11, 102], [101, 102, 0]])
    assert metadata.prompt_token_ids_cpu is not None
    assert metadata.prompt_token_ids is None
    assert metadata.prompt_token_ids_cpu.is_pinned() is False
    torch.testing.assert_close(
        metadata.prompt_lens, torch.tensor([3, 2], dtype=torch.int32)
    )
    torch.testing.assert_close(metadata.prompt_token_ids_cpu, expected)


@pytest.mark.parametrize("token_ids_type", [list, TokenBuffer])
def test_pooling_runner_stores_only_required_token_ids(token_ids_type) -> None:
    runner = PoolingRunner.__new__(PoolingRunner)
    runner.model = MagicMock()
    runner.supported_tasks = frozenset({"embed"})
    runner.pooling_params = {}
    runner.pooling_states = {}
    runner.prompt_token_ids = {}
    runner.late_interaction_runner = MagicMock()

    runner.add_request("req-1", 1, PoolingParams(task="embed"), [101, 102])
    runner.add_request(
        "req-2",
        2,
        PoolingParams(task="embed", requires_token_ids=True),
        token_ids_type([101, 11, 102]),
    )

    assert 1 not in runner.prompt_token_ids
    stored = runner.prompt_token_ids[2]
    assert stored.dtype == torch.int64
    torch.testing.assert_close(stored, torch.tensor([101, 11, 102]))


def test_pooling_runner_releases_aborted_late_interaction_doc() -> None:
    runner = PoolingRunner.__new__(PoolingRunner)
    runner.late_interaction_runner = LateInteractionRunner()

    query_key = "query-abort"
    late_interaction_runner = runner.late_interaction_runner
    late_interaction_runner._query_cache[query_key] = torch.ones(2, 4)
    late_interaction_runner._query_uses[query_key] = 1
    late_interaction_runner._doc_query_keys["doc-req"] = query_key

    runner.on_requests_finished({"doc-req"})

    assert not late_interaction_runner._query_cache
    assert not late_interaction_runner._query_uses
    assert not late_interaction_runner._doc_query_keys


def test_encoder_cache_reset_clears_late_interaction_state() -> None:
    # Cached query embeddings are only invalidated by weight reloads, which
    # reach the runner via reset_encoder_cache. Resetting the multi-modal
    # cache is unrelated and must leave them intact.
    runner = GPUModelRunner.__new__(GPUModelRunner)
    runner.encoder_cache = MagicMock()
    runner.pooling_runner = MagicMock()

    runner.reset_mm_cache()

    runner.encoder_cache.reset_mm_cache.assert_called_once_with()
    runner.pooling_runner.clear.assert_not_called()

    runner.reset_encoder_cache()

    runner.encoder_cache.reset_encoder_cache.assert_called_once_with()
    runner.pooling_runner.clear.assert_called_once_with()


def test_pooling_runner_rejects_unsupported_selected_task() -> None:
    model = MagicMock()
    model.pooler.get_supported_tasks.return_value = {"embed", "plugin"}
    vllm_config = MagicMock()
    vllm_config.scheduler_config.max_num_seqs = 2
    vllm_config.model_config.attn_type = "encoder_only"
    vllm_config.model_config.get_pooling_task.return_value = "plugin"

    with (
        patch.object(PoolingRunner, "get_supported_tasks", return_value=["embed"]),
        pytest.raises(ValueError, match="selects 'plugin'"),
    ):
        PoolingRunner(model, vllm_config)


def test_pooling_runner_supports_encoder_token_classification() -> None:
    model = MagicMock()
    model.pooler.get_supported_tasks.return_value = {"token_classify"}
    vllm_config = MagicMock()
    vllm_config.scheduler_config.max_num_seqs = 2
    vllm_config.model_config.attn_type = "encoder_only"
    vllm_config.model_config.get_pooling_task.return_value = "token_classify"

    runner = PoolingRunner(model, vllm_config)

    assert runner.supported_tasks == {"token_classify"}


def test_pooling_runner_supports_encoder_token_embedding() -> None:
    model = MagicMock()
    model.pooler.get_supported_tasks.return_value = {"token_embed"}
    vllm_config = MagicMock()
    vllm_config.scheduler_config.max_num_seqs = 2
    vllm_config.model_config.attn_type = "encoder_only"
    vllm_config.model_config.get_pooling_task.return_value = "token_embed"

    runner = PoolingRunner(model, vllm_config)

    assert runner.supported_tasks == {"token_embed"}


def test_pooling_runner_supports_decoder_token_classification() -> None:
    model = MagicMock()
    model.pooler.get_supported_tasks.return_value = {"token_classify"}
    vllm_config = MagicMock()
    vllm_config.scheduler_config.max_num_seqs = 2
    vllm_config.model_config.attn_type = "decoder"
    vllm_config.model_config.get_pooling_task.return_value = "token_classify"

    runner = PoolingRunner(model, vllm_config)

    assert runner.supported_tasks == {"token_classify"}


def test_pooling_runner_keeps_decoder_token_classification() -> None:
    model = MagicMock()
    model.pooler.get_supported_tasks.return_value = {"embed", "token_classify"}
    vllm_config = MagicMock()
    vllm_config.scheduler_config.max_num_seqs = 2
    vllm_config.model_config.attn_type = "decoder"
    vllm_config.model_config.get_pooling_task.return_value = "embed"

    runner = PoolingRunner(model, vllm_config)

    assert runner.supported_tasks == {"embed", "token_classify"}


def test_pooling_runner_keeps_decoder_token_embedding() -> None:
    model = MagicMock()
    model.pooler.get_supported_tasks.return_value = {"embed", "token_embed"}
    vllm_config = MagicMock()
    vllm_config.scheduler_config.max_num_seqs = 2
    vllm_config.model_config.attn_type = "decoder"
    vllm_config.model_config.get_pooling_task.return_value = "embed"

    runner = PoolingRunner(model, vllm_config)

    assert runner.supported_tasks == {"embed", "token_embed"}


def test_pooling_runner_supports_embed_token_classification() -> None:
    model = MagicMock()
    model.pooler.get_supported_tasks.return_value = {"embed", "embed&token_classify"}
    vllm_config = MagicMock()
    vllm_config.scheduler_config.max_num_seqs = 2

    vllm_config.model_config.attn_type = "encoder_only"
    vllm_config.model_config.get_pooling_task.return_value = "embed&token_classify"
    assert PoolingRunner(model, vllm_config).supported_tasks == {
        "embed",
        "embed&token_classify",
    }
