# SPDX-License-Identifier: Apache-2.0
"""Where vllm-splade cannot serve (`vllm_splade.cannot_serve`), the SPLADE
architectures resolve to this module, whose import fails with the reason:
vLLM then refuses the model, logging why, instead of serving its own
classes' other vectors."""

from . import cannot_serve

raise ImportError(
    cannot_serve() or "vllm-splade failed to register on this vLLM (see its log)"
)
