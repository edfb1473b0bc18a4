# SPDX-License-Identifier: Apache-2.0
"""sentence-transformers SparseEncoder folders served with no flags: the
`hf` config parser in place when the plugin loads (vLLM's, or another
plugin's), then the series' reading of the folder's SpladePooling
(`apply_sparse_encoder_config`, which the series calls in `get_config`).

An inference-free sparse encoder (a Router folder) has no config.json at
its root, so stock vLLM's `get_config` reaches this parser only with
`--config-format hf`; the parser then reads its model route's config, as
the series' `get_config` does."""

from pathlib import Path

from transformers import PreTrainedConfig
from vllm.transformers_utils.config import get_config_parser, register_config_parser
from vllm.transformers_utils.config_parser_base import ConfigParserBase

from .transformers_utils.sparse_encoder import (
    apply_sparse_encoder_config,
    get_sparse_router_config,
)


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
        sparse_router = get_sparse_router_config(str(model), revision)
        if sparse_router is not None:
            kwargs["subfolder"] = sparse_router["model_path"]
        config_dict, config = self.wrapped.parse(
            model, trust_remote_code, revision, code_revision, **kwargs
        )
        apply_sparse_encoder_config(config, str(model), revision, sparse_router)
        return config_dict, config


def register_sparse_encoder_config() -> None:
    previous = get_config_parser("hf")
    if isinstance(previous, SparseEncoderConfigParser):
        return
    SparseEncoderConfigParser.wrapped = previous
    # vLLM logs that `hf` is replaced.
    register_config_parser("hf")(SparseEncoderConfigParser)
