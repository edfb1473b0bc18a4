# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
from typing import Any

import orjson
from fastapi import Request
from fastapi.responses import Response
from vllm.entrypoints.pooling.base.serving import PoolingServing
from vllm.entrypoints.pooling.typing import PoolingServeContext
from vllm.exceptions import VLLMValidationError

from .io_processor import EmbedSparseIOProcessor
from .protocol import EmbedSparseError, EmbedSparseRequest

# TEI's --max-client-batch-size default: a request with more inputs is a 422.
MAX_CLIENT_BATCH_SIZE = 32


class SparseJSONResponse(Response):
    """TEI's lists of terms, encoded with orjson as vLLM's other pooling
    responses are (`create_json_response` takes models and dicts only)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


class ServingEmbedSparse(PoolingServing):
    """TEI-compatible sparse embeddings (``/embed_sparse``) of models with
    sparse vectors (`SupportsSparseEmbedding`), with TEI's limits."""

    request_id_prefix = "embsp"
    io_processor: EmbedSparseIOProcessor

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.json_response_cls = SparseJSONResponse

    def init_io_processor(self, *args, **kwargs) -> EmbedSparseIOProcessor:
        return EmbedSparseIOProcessor(*args, **kwargs)

    async def __call__(  # type: ignore[override]
        self,
        request: EmbedSparseRequest,
        raw_request: Request | None = None,
    ) -> Response:
        policy = self.vllm_config.scheduler_config.policy
        if request.priority and policy != "priority":
            # The engine would serve it first come, first served anyway.
            raise VLLMValidationError(
                "`priority` needs a server started with --scheduling-policy priority",
                parameter="priority",
            )
        batch_size = len(request.input_list)
        if batch_size > MAX_CLIENT_BATCH_SIZE:
            raise EmbedSparseError(
                f"batch size {batch_size} > maximum allowed batch size "
                f"{MAX_CLIENT_BATCH_SIZE}"
            )
        return await super().__call__(request, raw_request)  # type: ignore[arg-type]

    def _build_response(self, ctx: PoolingServeContext) -> Response:
        request = ctx.request
        assert isinstance(request, EmbedSparseRequest)
        content = [
            self.io_processor.to_sparse(
                self.io_processor.to_vocab_weights(output),
                request.top_k,
                request.return_tokens,
                request.threshold,
            )
            for output in ctx.final_res_batch
        ]
        # TEI's counts of what was computed.
        outputs = ctx.final_res_batch
        num_tokens = sum(len(output.prompt_token_ids or ()) for output in outputs)
        headers = {
            "x-compute-characters": str(sum(map(len, request.input_list))),
            "x-compute-tokens": str(num_tokens),
        }
        return self.json_response_cls(content=content, headers=headers)
