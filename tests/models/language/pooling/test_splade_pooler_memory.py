# SPDX-License-Identifier: Apache-2.0
"""The pooler's working memory is reused from call to call. On CPU a fresh
large buffer each step costs fresh page faults every step: the pooler of
series v3 (a 64 MiB logits buffer per call) faulted in ~15,000 pages per
512-token call at a BERT vocabulary, which made it 1.7x the bare decoder
GEMM; its blocks of vocabulary columns come back from the allocator warm."""
import resource

import numpy as np
import pytest
import torch

from vllm.model_executor.models.masked_lm import BertMLMHead
from vllm.model_executor.models.splade import SPLADESparsePooler
from vllm.pooling_params import PoolingParams
from vllm.v1.pool.metadata import PoolingMetadata, PoolingStates


def metadata(lens: list[int]) -> PoolingMetadata:
    meta = PoolingMetadata(
        prompt_lens=torch.tensor(lens, dtype=torch.int32),
        prompt_token_ids=None, prompt_token_ids_cpu=None,
        pooling_params=[PoolingParams(task="embed") for _ in lens],
        pooling_states=[PoolingStates() for _ in lens])
    meta.build_pooling_cursor(np.array(lens),
                              torch.tensor(lens, dtype=torch.int32),
                              torch.device("cpu"))
    return meta


@pytest.mark.usefixtures("default_vllm_config")
@pytest.mark.parametrize("pooling", ["max", "sum"])
@torch.inference_mode()
def test_steps_of_512_tokens_fault_in_no_fresh_pages(pooling):
    torch.manual_seed(0)
    head = BertMLMHead(hidden_size=128, vocab_size=30522)
    pooler = SPLADESparsePooler(head, pooling=pooling)
    lens = [64] * 8  # one CPU scheduler step: 512 tokens
    hidden = torch.randn(sum(lens), 128)
    for _ in range(3):  # warm the allocator
        pooler(hidden, metadata(lens))
    calls = 10
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        pooler(hidden, metadata(lens))
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(f"\n{pooling}: {faults / calls:.0f} page faults per 512-token call")
    # 16 MiB of logits would be 4,096 pages if allocated afresh.
    assert faults / calls < 500
