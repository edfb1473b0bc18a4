# SPDX-License-Identifier: Apache-2.0
"""vllm-splade: SPLADE on the official vLLM wheel, as a vLLM plugin.

Two entry points under two names. `vllm_splade` (`vllm.general_plugins`,
`register`) runs in every vLLM process before the model config is made:
it serves the SPLADE architectures (and DistilBERT, which vLLM lacks) from
the series' own modules (shipped in `vllm_splade.models`) in place of
vLLM's, and reads sentence-transformers SparseEncoder folders with no flags
(`vllm_splade.config`); installed, it is on. `vllm_splade_embed_sparse`
(`vllm.endpoint_plugins`) adds TEI's `/embed_sparse`, only where
`VLLM_PLUGINS` names it, as vLLM loads endpoint plugins.

On a vLLM that already has the series both step aside for its own classes.
On a vLLM outside the series the modules are written for (`VLLM_SERIES`,
from this package's version) they refuse: the SPLADE architectures then
fail to load with the reason, other models load untouched, and the
endpoint is absent, with the same reason in the log.
"""

import importlib.util
import re

from vllm.logger import init_logger

# Under `vllm.`, this package's loggers (the shipped modules' too) write
# where vLLM's do, as vLLM configures them.
logger = init_logger(f"vllm.{__name__}")

# This package's version, <vLLM series>.<fix>: 0.34.2 is the third release
# for vLLM 0.34.x. Written here only (pyproject.toml reads it).
__version__ = "0.34.0"
# The vLLM release series the shipped modules are written for: every build
# of it is served (releases, post releases, rcs, dev and local builds).
VLLM_SERIES = ".".join(__version__.split(".")[:2])

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
    "GteNewSpladeSparseEmbeddingModel": "splade:GteNewSpladeSparseEmbeddingModel",
}
# Lexical weights, one per input token (as BGE-M3's): mGTE's.
LEXICAL_MODELS = {
    "GteNewLexicalEmbeddingModel": "gte_lexical:GteNewLexicalEmbeddingModel",
}
# Everything registered: SPLADE, lexical weights, and the series' DistilBERT
# (new in vLLM: stock 0.34 has no DistilBertModel and fails to load
# DistilBertForMaskedLM).
MODELS = {
    **SPARSE_MODELS,
    **LEXICAL_MODELS,
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
    from vllm import __version__ as version

    return version


def vllm_series(version: str) -> str | None:
    """A vLLM version's release series ("0.34" for 0.34.1.post1,
    0.34.0rc2, 0.34.1.dev5+gabc or 0.34.0+cpu): the first two numbers of
    its PEP 440 release segment; None if it has none ("dev", vLLM's own
    fallback)."""
    found = re.match(r"v?(?:\d+!)?(\d+)\.(\d+)(?![\d])", version.strip())
    return f"{int(found[1])}.{int(found[2])}" if found else None


def refusal_reason(missing: list[str] | None = None) -> str | None:
    """Why this package cannot serve on the installed vLLM (None if it can):
    another release series, or, given `missing`, internals of vLLM that the
    shipped modules use and this build lacks."""
    installed = vllm_version()
    needed = f"a vLLM {VLLM_SERIES}.x build"
    if vllm_series(installed) != VLLM_SERIES:
        problem = f"vLLM {installed} is installed"
    elif missing:
        problem = f"vLLM {installed} lacks {', '.join(missing)}"
    else:
        return None
    return (
        f"vllm-splade {__version__} is written for vLLM {VLLM_SERIES}.x, but "
        f"{problem}: its SPLADE models, SparseEncoder config reading and "
        f"/embed_sparse are off. Install {needed} (`pip install "
        f"'vllm=={VLLM_SERIES}.*'`), or the vllm-splade release for your "
        f"vLLM (`pip install 'vllm-splade=={vllm_series(installed)}.*'`)."
    )


def cannot_serve() -> str | None:
    """Why this package cannot serve on the installed vLLM, checked in every
    process: the release series, and the internals that its config reading
    imports (the models' and the endpoint's are probed where they load:
    `vllm_splade.compat`). None if it can."""
    reason = refusal_reason()
    if reason is None:
        try:
            from . import config  # noqa: F401
        except (ImportError, AttributeError) as error:
            reason = refusal_reason([str(error)])
    return reason


def register() -> None:
    """Serve SPLADE from this package: its models, and SparseEncoder folders'
    config. Every process runs it, some more than once: only the first call
    registers. It never raises (vLLM does not catch a general plugin's
    error, and every model on the machine would stop loading)."""
    global _registered
    if _registered:
        return
    _registered = True
    try:
        _register()
    except Exception:
        logger.exception(
            "vllm-splade: not registered; its SPLADE architectures are refused"
        )
        _refuse("vllm-splade failed to register on this vLLM (see its log)")


def _refuse(reason: str) -> None:
    """The SPLADE architectures and sentence-transformers sparse folders fail
    to load, saying why: vLLM's own classes would serve other vectors
    ([CLS]/[SEP] dropped, today's checkpoints mis-loaded, a SparseEncoder
    folder as the masked-LM or dense model its config.json names) without
    a word. Best effort: on another vLLM either step may be impossible."""
    try:
        from vllm import ModelRegistry

        for arch in (*SPARSE_MODELS, *LEXICAL_MODELS):
            ModelRegistry.register_model(arch, f"{__name__}.refused:{arch}")
    except Exception:
        logger.exception("vllm-splade: could not refuse the SPLADE architectures")
    try:
        from .refusing_config import register_refusing_config

        register_refusing_config(reason)
    except Exception:
        logger.exception("vllm-splade: could not refuse SparseEncoder folders")


def _register() -> None:
    if series_in_tree():
        logger.debug(
            "vllm-splade: this vLLM has the SPLADE series in-tree; its own "
            "models and config are used"
        )
        return
    from vllm import ModelRegistry

    reason = cannot_serve()
    if reason is not None:
        logger.error(reason)
        _refuse(reason)
        return

    known = set(ModelRegistry.get_supported_archs())
    replaced = sorted(set(MODELS) & known)
    added = sorted(set(MODELS) - known)
    for arch, target in MODELS.items():
        ModelRegistry.register_model(arch, f"{__name__}.models.{target}")
    from .config import register_sparse_encoder_config

    register_sparse_encoder_config()
    # A warning, as vLLM's for the replaced `hf` parser: logging is not
    # configured yet when general plugins load, and only warnings show.
    logger.warning(
        "vllm-splade: serving %s with the SPLADE series' classes in place of "
        "vLLM %s's (which drop [CLS]/[SEP], fail to load checkpoints saved "
        "with tied or legacy weights and pool one request at a time); adding "
        "%s (vllm-splade %s)",
        ", ".join(replaced) or "nothing",
        vllm_version(),
        ", ".join(added) or "nothing",
        __version__,
    )
