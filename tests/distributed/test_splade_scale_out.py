# SPDX-License-Identifier: Apache-2.0
"""Scale-out is vLLM's job; SPLADE must not block it. Tensor parallel 2 and
data parallel 2 on the CPU build give the TP=1 vectors (the same terms;
weights up to fp32 reduction order)."""
import pytest
import torch

from tests.conftest import vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer


@pytest.mark.parametrize("parallel", ["--tensor-parallel-size",
                                      "--data-parallel-size"])
def test_two_way_parallel_equals_one(splade_tiny, splade_llm, parallel,
                                     monkeypatch):
    # vLLM's CPU worker binds rank N to NUMA node N; on a one-node machine
    # the two ranks must be bound by hand, one core each.
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    want = vllm_vectors(splade_llm, PARITY_TEXTS)
    with SpladeServer(splade_tiny, extra_args=(parallel, "2")) as server:
        got = torch.tensor(server.embeddings(PARITY_TEXTS, batch_size=8))
    diff = (got - want).abs().max().item()
    print(f"\n{parallel} 2 vs 1: max abs diff {diff:.3g}")
    assert torch.equal(got > 0, want > 0)
    assert diff <= 1e-5
