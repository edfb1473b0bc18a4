# SPDX-License-Identifier: Apache-2.0
"""TEI's `/embed_sparse`, as a `vllm.endpoint_plugins` entry point.

The route is attached to every API server with the endpoint enabled
(`VLLM_PLUGINS` names `vllm_splade_embed_sparse`) whose engine pools; a model without sparse
vectors answers it as TEI 1.9 answers a model without SPLADE pooling (424,
"Model is not an embedding model with SPLADE pooling"). With `--api-key`
or `VLLM_API_KEY` set, it answers only requests that carry the key, as
vLLM's /v1 routes do (401 otherwise).
"""

from argparse import Namespace

from fastapi import FastAPI
from starlette.datastructures import State
from vllm.engine.protocol import EngineClient
from vllm.logger import init_logger

logger = init_logger(f"vllm.{__name__}")


def check_splade_is_ours(architecture: str, task: str | None) -> None:
    """A SPLADE model behind /embed_sparse must be the series' class (the
    plugin's, or vLLM's own where vLLM has the series): with the endpoint
    named in VLLM_PLUGINS but not the models' plugin, stock vLLM would
    serve its own SPLADE class, whose vectors differ. Refused at start."""
    from vllm import ModelRegistry

    from .. import series_in_tree

    if task != "embed" or series_in_tree():
        return  # BGE-M3's lexical weights are vLLM's own model's
    entry = ModelRegistry.models.get(architecture)
    module = getattr(entry, "module_name", None) or getattr(
        getattr(entry, "model_cls", None), "__module__", ""
    )
    if not str(module).startswith("vllm_splade."):
        raise RuntimeError(
            f"vllm-splade: /embed_sparse would serve vLLM's own {architecture} "
            f"({module}), not vllm-splade's: VLLM_PLUGINS names the endpoint "
            "but not the models' plugin. Set "
            "VLLM_PLUGINS=vllm_splade,vllm_splade_embed_sparse (and your "
            "other plugins)."
        )


class EmbedSparsePlugin:
    name = "vllm_splade_embed_sparse"
    required_tasks = ("embed", "token_classify")

    def __init__(self) -> None:
        # Written for one vLLM release series (or one with the series'
        # modules): on another, or on a build without the internals it
        # imports, vLLM logs this and loads no /embed_sparse.
        from .. import refusal_reason
        from ..compat import missing_internals

        reason = refusal_reason(missing_internals("embed_sparse"))
        if reason is not None:
            raise RuntimeError(reason)

    def attach_router(self, app: FastAPI) -> None:
        from .api_router import router

        app.include_router(router)

    async def init_state(
        self, engine_client: EngineClient | None, state: State, args: Namespace
    ) -> None:
        from .auth import api_key_check

        # First, so that the route is locked whatever happens below.
        state.embed_sparse_key_check = api_key_check(args)
        state.serving_embed_sparse = None
        if engine_client is None:
            return
        from vllm.entrypoints.serve.utils.request_logger import RequestLogger
        from vllm.renderers.chat_utils import ChatTemplateConfig, load_chat_template

        from .serving import ServingEmbedSparse
        from .tasks import sparse_embedding_task

        model_config = engine_client.model_config
        task = sparse_embedding_task(model_config)
        if task not in await engine_client.get_supported_tasks():
            logger.info(
                "vllm-splade: /embed_sparse answers 424: %s gives no sparse "
                "vectors the engine runs",
                model_config.architecture,
            )
            return
        check_splade_is_ours(model_config.architecture, task)
        request_logger = (
            RequestLogger(max_log_len=args.max_log_len)
            if args.enable_log_requests
            else None
        )
        chat_template_config = ChatTemplateConfig(
            chat_template=load_chat_template(args.chat_template),
            chat_template_content_format=args.chat_template_content_format,
            trust_request_chat_template=args.trust_request_chat_template,
            trust_request_mm_kwargs=args.trust_request_mm_kwargs,
        )
        state.serving_embed_sparse = ServingEmbedSparse(
            engine_client,
            state.openai_serving_models,
            request_logger=request_logger,
            chat_template_config=chat_template_config,
        )
        logger.info("vllm-splade: /embed_sparse serves %s", task)
