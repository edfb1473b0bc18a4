# SPDX-License-Identifier: Apache-2.0
"""vllm-splade: SPLADE on the official vLLM wheel, as a vLLM plugin.

`register` is the `vllm.general_plugins` entry point, run in every vLLM
process (API server, engine core, workers) before the model config is made.
It serves the SPLADE architectures from the series' own modules (shipped in
`vllm_splade.models`) in place of vLLM's, and reads sentence-transformers
SparseEncoder folders with no flags (`vllm_splade.config`). On a vLLM that
already has the series it steps aside, and on another release than the one
its modules are written for it refuses, saying so.
"""

import importlib.util
from importlib.metadata import version

from vllm.logger import init_logger

# Under `vllm.`, this package's loggers (the shipped modules' too) write
# where vLLM's do, as vLLM configures them.
logger = init_logger(f"vllm.{__name__}")

# The vLLM release the shipped modules are written for (the series' pin).
VLLM_RELEASE = "@VLLM_VERSION@"

# SPLADE architectures -> this package's classes (lazily imported).
SPARSE_MODELS = {
    "BertSpladeSparseEmbeddingModel": "splade:BertSpladeSparseEmbeddingModel",
    "RobertaSpladeSparseEmbeddingModel": "splade:RobertaSpladeSparseEmbeddingModel",
    "ModernBertSpladeSparseEmbeddingModel": (
        "splade:ModernBertSpladeSparseEmbeddingModel"
    ),
    "DistilBertSpladeSparseEmbeddingModel": (
        "distilbert:DistilBertSpladeSparseEmbeddingModel"
    ),
}
# Everything registered: SPLADE, and the series' DistilBERT (new in vLLM:
# stock 0.34 has no DistilBertModel and fails to load DistilBertForMaskedLM).
MODELS = {
    **SPARSE_MODELS,
    "DistilBertModel": "distilbert:DistilBertEmbeddingModel",
    "DistilBertForMaskedLM": "distilbert:DistilBertForMaskedLM",
}


def series_in_tree() -> bool:
    """Whether the installed vLLM has the series' SPLADE modules itself."""
    return importlib.util.find_spec("vllm.model_executor.models.splade") is not None


def release_supported() -> bool:
    """Whether the installed vLLM is the release the modules are written for
    (a local build of it, such as vLLM's CPU wheel, included)."""
    return version("vllm").split("+")[0] == VLLM_RELEASE


def register() -> None:
    """Serve SPLADE from this package: its models, and SparseEncoder folders'
    config. Safe to run more than once per process."""
    if series_in_tree():
        logger.debug_once(
            "vllm-splade: this vLLM has the SPLADE series in-tree; its own "
            "models and config are used"
        )
        return
    if not release_supported():
        logger.error_once(
            "vllm-splade %s is written for vLLM %s, but vLLM %s is installed: "
            "its SPLADE models are not registered. Install the vllm-splade "
            "release for this vLLM.",
            version("vllm-splade"),
            VLLM_RELEASE,
            version("vllm"),
        )
        return

    from vllm import ModelRegistry

    from .config import register_sparse_encoder_config

    overridden = sorted(set(MODELS) & set(ModelRegistry.get_supported_archs()))
    for arch, target in MODELS.items():
        ModelRegistry.register_model(arch, f"{__name__}.models.{target}")
    register_sparse_encoder_config()
    if overridden:
        # A warning, as vLLM's for the replaced `hf` parser: logging is not
        # configured yet when general plugins load, and only warnings show.
        logger.warning_once(
            "vllm-splade: serving %s with the SPLADE series' classes in place "
            "of vLLM %s's (which drop [CLS]/[SEP], fail to load checkpoints "
            "saved with tied or legacy weights and pool one request at a time)",
            ", ".join(overridden),
            VLLM_RELEASE,
        )
