# SPDX-License-Identifier: Apache-2.0
"""sentence-transformers SparseEncoder folders served with no flags: the
`hf` config parser in place when the plugin loads (vLLM's, or another
plugin's), then the series' reading of the folder's SpladePooling
(`apply_sparse_encoder_config`, which the series calls in `get_config`).

An inference-free sparse encoder (a Router folder) in sentence-transformers'
layout has no config.json at its root, so stock vLLM's `get_config` reaches
this parser only with `--config-format hf`; where the parser it wraps finds
no config, it then reads the model route's, as the series' `get_config`
does (other models are never probed for a Router). One in OpenSearch's
layout (the model at the root) needs no flag: its root config is the
model's.

Alibaba's GTE config (`model_type` "new", OpenSearch's doc-v3-gte) is read
without remote code, as the series reads it (vLLM's config registry): the
series' `NewConfig` is registered with transformers' AutoConfig, which only
a load without --trust-remote-code consults. Stock vLLM's table of config
updates by architecture (`MODELS_CONFIG_MAP`) gets the series' entries for
its GTE classes (SPLADE, mGTE's lexical weights): GTE's update
(`GteNewModelConfig`), as for vLLM's own GTE classes."""

from pathlib import Path

from transformers import AutoConfig, PreTrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.utils import CONFIG_NAME as HF_CONFIG_NAME
from vllm.transformers_utils.config import get_config_parser, register_config_parser
from vllm.transformers_utils.config_parser_base import ConfigParserBase

from vllm.logger import init_logger

from .transformers_utils.gte_new import NewConfig
from .transformers_utils.sparse_encoder import (
    apply_sparse_encoder_config,
    get_sparse_router_config,
)

logger = init_logger(f"vllm.{__name__}")


class SparseEncoderConfigParser(ConfigParserBase):
    """The `hf` parser it replaced (`wrapped`); a masked-LM backbone saved
    by a SparseEncoder then gets its SPLADE architecture and pooling.
    `--hf-overrides` still wins: vLLM applies them after the parser."""

    wrapped: ConfigParserBase

    def parse(
        self,
        model: str | Path,
        trust_remote_code: bool,
        revision: str | None = None,
        code_revision: str | None = None,
        **kwargs,
    ) -> tuple[dict, PreTrainedConfig]:
        sparse_router = None
        try:
            config_dict, config = self.wrapped.parse(
                model, trust_remote_code, revision, code_revision, **kwargs
            )
        except Exception:
            # Only a local folder without a config.json may be a Router (on
            # stock vLLM a Router loads from a local folder), and only then
            # is modules.json looked at: any other failure is the wrapped
            # parser's, raised as it was.
            folder = Path(model)
            if not folder.is_dir() or (folder / HF_CONFIG_NAME).is_file():
                raise
            sparse_router = get_sparse_router_config(str(model), revision)
            if sparse_router is None:
                raise
            kwargs["subfolder"] = sparse_router["model_path"]
            config_dict, config = self.wrapped.parse(
                model, trust_remote_code, revision, code_revision, **kwargs
            )
        # A Router whose model sits at the root (OpenSearch's layout) is
        # found here, from the root's masked-LM config.
        apply_sparse_encoder_config(config, str(model), revision, sparse_router)
        if sparse_router := getattr(config, "sparse_router", None):
            _warn_default_route(str(model), sparse_router)
        return config_dict, config


# The series' GTE classes, which stock vLLM's table of config updates by
# architecture lacks.
_GTE_ARCHITECTURES = (
    "GteNewSpladeSparseEmbeddingModel",
    "GteNewLexicalEmbeddingModel",
)


def register_sparse_encoder_config() -> None:
    if "new" not in CONFIG_MAPPING:
        AutoConfig.register("new", NewConfig)
    # As the series' entries: ModelConfig looks the table up by the
    # architecture it resolves, after --hf-overrides, in every process.
    from vllm.model_executor.models.config import (
        MODELS_CONFIG_MAP,
        GteNewModelConfig,
    )

    for architecture in _GTE_ARCHITECTURES:
        MODELS_CONFIG_MAP.setdefault(architecture, GteNewModelConfig)
    previous = get_config_parser("hf")
    if isinstance(previous, SparseEncoderConfigParser):
        return
    SparseEncoderConfigParser.wrapped = previous
    # vLLM logs that `hf` is replaced.
    register_config_parser("hf")(SparseEncoderConfigParser)


_warned: set[str] = set()


def _warn_default_route(model: str, sparse_router: dict) -> None:
    """What stock vLLM does with a request that names no route, where it
    differs from the series (which tokenizes a static route without special
    tokens on every entry point, and refuses a missing route)."""
    default = sparse_router["default_route"]
    other_routes = sparse_router.get("other_routes", {})
    if model in _warned or (
        default is not None
        and default not in sparse_router["static_routes"]
        and default not in other_routes
    ):
        return
    _warned.add(model)
    if default in other_routes:
        logger.warning(
            "vllm-splade: the default route of %s, %r, runs another model "
            "or pooling (%r) than this server (its %r route). /embed_sparse "
            "refuses it; on stock vLLM /v1/embeddings and offline requests "
            "that name no route get the %r route's vectors: name the route "
            "in every request.",
            model,
            default,
            other_routes[default],
            sparse_router["model_route"],
            sparse_router["model_route"],
        )
        return
    if default is None:
        logger.warning(
            "vllm-splade: %s has no default route. On stock vLLM a request "
            "that names none takes its model route %r (/embed_sparse refuses "
            "it): name the route in every request.",
            model,
            sparse_router["model_route"],
        )
        return
    logger.warning(
        "vllm-splade: the default route of %s, %r, is a static one. On stock "
        "vLLM only /embed_sparse tokenizes its input without special tokens, "
        "as sentence-transformers does: /v1/embeddings, /pooling and offline "
        "requests that name no route get the [CLS]/[SEP] weights too (offline, "
        "pass tokenization_kwargs={'add_special_tokens': False}).",
        model,
        default,
    )
