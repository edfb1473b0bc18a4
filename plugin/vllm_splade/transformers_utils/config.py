# SPDX-License-Identifier: Apache-2.0
"""vLLM's transformers_utils.config as the series' sparse_encoder.py reads
it, and `get_sentence_transformer_modules` where the installed vLLM has none
(the series adds it to vllm/transformers_utils/config.py, where vLLM's own
readers of modules.json share it; stock vLLM's read the file again)."""

from functools import cache
from pathlib import Path
from typing import Any

from vllm.transformers_utils import config as _vllm
from vllm.transformers_utils.config import (  # noqa: F401
    _ST_TRANSFORMER_MODULE_TYPES,
    file_or_path_exists,
    get_hf_file_to_dict,
)

if hasattr(_vllm, "get_sentence_transformer_modules"):
    get_sentence_transformer_modules = _vllm.get_sentence_transformer_modules
else:

    @cache
    def get_sentence_transformer_modules(
        model: str | Path,
        revision: str | None = "main",
    ) -> list[dict[str, Any]] | None:
        """A sentence-transformers model's modules.json, read once per model
        and revision; None if the model has none."""
        if not file_or_path_exists(model, "modules.json", revision=revision):
            return None
        return get_hf_file_to_dict("modules.json", model, revision)
