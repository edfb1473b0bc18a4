# SPDX-License-Identifier: Apache-2.0
"""Scale-out is vLLM's job; SPLADE must not block it. Tensor parallel 2 and
data parallel 2 on the CPU build give the TP=1 vectors (the same terms;
weights up to fp32 reduction order).

Through `vllm serve`, as a user would run it: each rank is a spawned
process (vLLM's CPU platform forces spawn) that imports vLLM afresh, so on
a 2-core machine a TP=2 server takes ~2.5 min to answer /health and a DP=2
one longer; the timeouts below allow for that."""
import pytest
import torch

from tests.conftest import vllm_vectors
from tests.models.language.pooling.splade_texts import PARITY_TEXTS
from tests.utils import SpladeServer


@pytest.mark.parametrize("parallel", [
    ("--tensor-parallel-size", "2"),
    # One API server: vLLM defaults to one per DP rank, a third process
    # importing vLLM here, and DP needs none of it.
    ("--data-parallel-size", "2", "--api-server-count", "1"),
],
                         ids=["tp2", "dp2"])
def test_two_way_parallel_equals_one(splade_tiny, splade_llm, parallel,
                                     monkeypatch):
    # vLLM's CPU worker binds rank N to NUMA node N; on a one-node machine
    # the two TP ranks must be bound by hand, one core each. Ranks are
    # processes, so the server needs multiprocessing on.
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    if parallel[0] == "--data-parallel-size":
        # Since 0.34, DP rank N binds NUMA node N, which a one-node machine
        # lacks (IndexError at worker start). vLLM's CPU CI simulates the
        # nodes, which splits the cores between them by itself.
        monkeypatch.setenv("VLLM_CPU_SIM_MULTI_NUMA", "1")
    else:
        monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")
    want = vllm_vectors(splade_llm, PARITY_TEXTS)
    with SpladeServer(splade_tiny, extra_args=parallel,
                      timeout=540) as server:
        got = torch.tensor(server.embeddings(PARITY_TEXTS, batch_size=8))
    diff = (got - want).abs().max().item()
    print(f"\n{' '.join(parallel)} vs 1: max abs diff {diff:.3g}")
    assert torch.equal(got > 0, want > 0)
    assert diff <= 1e-5
