# SPDX-License-Identifier: Apache-2.0
"""vllm-splade: SPLADE on the official vLLM wheel, as a vLLM plugin.

`register` is the `vllm.general_plugins` entry point, run in every vLLM
process (API server, engine core, workers) before the model config is made.
It serves the SPLADE architectures (and DistilBERT, which vLLM lacks) from
the series' own modules (shipped in `vllm_splade.models`) in place of
vLLM's, and reads sentence-transformers SparseEncoder folders with no flags
(`vllm_splade.config`). On a vLLM that already has the series it steps
aside, and on another release than the one its modules are written for it
refuses, saying so; so does its endpoint (`vllm_splade.embed_sparse`).
"""

import importlib.util
from importlib.metadata import PackageNotFoundError, version

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

_registered = False


def series_in_tree() -> bool:
    """Whether the installed vLLM has the series' SPLADE modules itself."""
    return all(
        importlib.util.find_spec(module) is not None
        for module in (
            "vllm.model_executor.models.splade",
            "vllm.transformers_utils.sparse_encoder",
        )
    )


def vllm_version() -> str:
    from vllm import __version__

    return __version__


def release_supported() -> bool:
    """Whether the installed vLLM is the release the modules are written for
    (a local build of it, such as vLLM's CPU wheel, included)."""
    return vllm_version().split("+")[0] == VLLM_RELEASE


def refusal() -> str:
    try:
        ours = version("vllm-splade")
    except PackageNotFoundError:
        ours = VLLM_RELEASE
    return (
        f"vllm-splade {ours} is written for vLLM {VLLM_RELEASE}, but vLLM "
        f"{vllm_version()} is installed: its SPLADE models, SparseEncoder "
        "config reading and /embed_sparse are off. Install the vllm-splade "
        "release for this vLLM."
    )


def register() -> None:
    """Serve SPLADE from this package: its models, and SparseEncoder folders'
    config. Every process runs it, some more than once: only the first call
    registers."""
    global _registered
    if _registered:
        return
    _registered = True
    if series_in_tree():
        logger.debug(
            "vllm-splade: this vLLM has the SPLADE series in-tree; its own "
            "models and config are used"
        )
        return
    if not release_supported():
        logger.error(refusal())
        return

    from vllm import ModelRegistry

    from .config import register_sparse_encoder_config

    known = set(ModelRegistry.get_supported_archs())
    replaced = sorted(set(MODELS) & known)
    added = sorted(set(MODELS) - known)
    for arch, target in MODELS.items():
        ModelRegistry.register_model(arch, f"{__name__}.models.{target}")
    register_sparse_encoder_config()
    # A warning, as vLLM's for the replaced `hf` parser: logging is not
    # configured yet when general plugins load, and only warnings show.
    logger.warning(
        "vllm-splade: serving %s with the SPLADE series' classes in place of "
        "vLLM %s's (which drop [CLS]/[SEP], fail to load checkpoints saved "
        "with tied or legacy weights and pool one request at a time); adding "
        "%s",
        ", ".join(replaced) or "nothing",
        VLLM_RELEASE,
        ", ".join(added) or "nothing",
    )
