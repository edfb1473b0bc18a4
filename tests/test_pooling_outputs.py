# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
import pytest
import torch

from vllm.outputs import EmbeddingOutput, PoolingOutput, SparseEmbedding

pytestmark = pytest.mark.cpu_test


def _vector() -> torch.Tensor:
    dense = torch.zeros(16)
    dense[[1, 4, 9]] = torch.tensor([0.25, 2.0, 1.5])
    return dense


@pytest.mark.parametrize("sparse", [False, True])
def test_pooling_output_dense_and_sparse(sparse: bool):
    dense = _vector()
    output = PoolingOutput(dense.to_sparse() if sparse else dense)

    assert output.is_sparse == sparse
    assert output.shape == dense.shape
    indices, values = output.sparse()
    assert indices.tolist() == [1, 4, 9]
    assert values.tolist() == [0.25, 2.0, 1.5]
    # Whoever asks for the dense vector gets it unchanged.
    assert not output.data.is_sparse
    assert torch.equal(output.data, dense)
    assert output == PoolingOutput(dense)


@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_output_sparse(sparse: bool):
    dense = _vector()
    output = EmbeddingOutput.from_base(
        PoolingOutput(dense.to_sparse() if sparse else dense)
    )

    assert output.hidden_size == 16
    assert output.sparse == SparseEmbedding([1, 4, 9], [0.25, 2.0, 1.5])
    assert output.embedding == dense.tolist()
    assert output == EmbeddingOutput(dense.tolist())
    assert EmbeddingOutput(dense.tolist()).sparse == output.sparse


def test_sparse_embedding_tokens():
    class Tokenizer:
        def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
            return [f"t{i}" for i in ids]

    assert SparseEmbedding([1, 4], [1.0, 2.0]).tokens(Tokenizer()) == ["t1", "t4"]


def test_embedding_output_needs_one_source():
    with pytest.raises(ValueError, match="one of"):
        EmbeddingOutput()
