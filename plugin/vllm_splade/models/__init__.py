# SPDX-License-Identifier: Apache-2.0
"""The series' SPLADE modules (vllm/model_executor/models/{splade,masked_lm,
distilbert}.py), copied into the wheel by scripts/vendor-series.py with
their imports pointed at this package, and what they need from the series'
other files where the installed vLLM lacks it (`interfaces`). Imported
where a model is about to load: a vLLM build without the internals they
use fails here, naming every one it lacks."""

from ..compat import check_internals

check_internals("models")
