# SPDX-License-Identifier: Apache-2.0
"""vLLM's model interfaces, and `SupportsSparseEmbedding` where the
installed vLLM has none of its own (the series adds it to
vllm/model_executor/models/interfaces.py)."""

from typing import ClassVar, Literal, Protocol, runtime_checkable

from vllm.model_executor.models import interfaces as _vllm

if hasattr(_vllm, "SupportsSparseEmbedding"):
    SupportsSparseEmbedding = _vllm.SupportsSparseEmbedding
else:

    @runtime_checkable
    class SupportsSparseEmbedding(Protocol):  # type: ignore[no-redef]
        """Pooling models whose `embed` output is a sparse vector over the
        vocabulary."""

        supports_sparse_embedding: ClassVar[Literal[True]] = True
