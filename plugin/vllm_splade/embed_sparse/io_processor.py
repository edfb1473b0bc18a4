# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
import json
from collections.abc import Sequence
from dataclasses import replace
from http import HTTPStatus

import torch
from vllm import PoolingParams, PoolingRequestOutput
from vllm.entrypoints.pooling.base.io_processor import PoolingIOProcessor
from vllm.entrypoints.pooling.typing import (
    AnyRenderParam,
    EncodeCMPLRenderParams,
    PoolingEngineInput,
    PoolingServeContext,
)
from vllm.exceptions import VLLMServerError
from vllm.inputs import TokensPrompt
from vllm.logger import init_logger
from vllm.renderers import TokenizeParams
from vllm.renderers.inputs.preprocess import parse_model_prompt
from vllm.transformers_utils.repo_utils import get_hf_file_to_dict

from ..stock import pooling_route, route_pooling_params
from .protocol import EmbedSparseError, EmbedSparseRequest
from .tasks import sparse_embedding_task

logger = init_logger(f"vllm.{__name__}")


class EmbedSparseIOProcessor(PoolingIOProcessor):
    """Turns a TEI ``/embed_sparse`` request into prompts for the model's
    sparse embedding task (``embed`` for SPLADE, ``token_classify`` for
    BGE-M3) and its outputs back into TEI's sparse lists."""

    name = "embed"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        model_config = self.model_config
        self.task = sparse_embedding_task(model_config) or "embed"
        self.vocab_size = model_config.get_vocab_size()
        self.prompts = _sentence_transformers_prompts(
            model_config.model, model_config.revision
        )
        # An inference-free sparse encoder's routes: `prompt_name` picks one,
        # as sentence-transformers' encode_query/encode_document do.
        self.router = getattr(model_config.hf_config, "sparse_router", None) or {}
        self.routes: list[str] = self.router.get("routes", [])
        tokenizer = self.renderer.tokenizer
        self.truncation_side = getattr(tokenizer, "truncation_side", "right")
        # Read off the tokenizer when first needed (see `_truncate`).
        self._around: tuple[list[int], list[int]] | None = None
        # The rows upstream's BOSEOSFilter removes from token outputs.
        hf_config = model_config.hf_config
        self.bos_token_id = getattr(hf_config, "bos_token_id", None)
        self.eos_token_id = getattr(hf_config, "eos_token_id", None)
        if self.task == "token_classify":
            # The tokens FlagEmbedding leaves out of BGE-M3's lexical
            # weights, as this model's tokenizer names them.
            special = (
                getattr(tokenizer, name, None)
                for name in (
                    "cls_token_id",
                    "eos_token_id",
                    "pad_token_id",
                    "unk_token_id",
                )
            )
            self.unused_token_ids = torch.tensor(
                [i for i in special if isinstance(i, int)], dtype=torch.long
            )

    def create_pooling_params(self, request: EmbedSparseRequest) -> PoolingParams:
        # As the series' PoolingParams.verify; stock vLLM checks nothing.
        route = request.prompt_name
        if route not in self.routes:
            route = self.router.get("default_route")
            if self.routes and route is None:
                raise EmbedSparseError(
                    "Input validation error: the model has no default route; "
                    f"set `prompt_name` to one of {json.dumps(self.routes)}"
                )
        other_routes = self.router.get("other_routes", {})
        if route in other_routes:
            other = other_routes[route]
            where = f"{other['path']}/" if other["path"] else "the folder's root"
            raise EmbedSparseError(
                f"Input validation error: route `{route}` runs the model in "
                f"{where}, pooled with `{other['splade_pooling_strategy']}` "
                f"and `{other['splade_activation_function']}`, and this server "
                f"its `{self.router['model_route']}` route's; serve that route "
                "from a second server"
            )
        if request.prompt_name in self.routes:
            return route_pooling_params(request.prompt_name, task=self.task)
        return PoolingParams(task=self.task)

    def _is_static_route(self, params) -> bool:
        """Whether `params` take an inference-free encoder's static route:
        the series' PoolingIOProcessor knows; on stock vLLM, the plugin."""
        is_static = getattr(super(), "_is_static_route", None)
        if is_static is not None:
            return is_static(params)
        if not self.routes or not isinstance(params, PoolingParams):
            return False
        route = pooling_route(params, self.router["default_route"])
        return route in self.router["static_routes"]

    def to_vocab_weights(self, output: PoolingRequestOutput) -> torch.Tensor:
        """One weight per vocabulary token. A ``token_classify`` output (one
        weight per token, less the BOS/EOS rows BOSEOSFilter drops) becomes
        the largest positive weight of each token id, special tokens left
        out, as FlagEmbedding's lexical weights."""
        data = output.outputs.data
        if self.task != "token_classify":
            return data
        token_ids = list(output.prompt_token_ids or [])
        weights = data.reshape(-1).to(torch.float32)
        token_ids = self._rows_of(token_ids, len(weights))
        ids = torch.tensor(token_ids, dtype=torch.long)
        keep = (weights > 0) & ~torch.isin(ids, self.unused_token_ids)
        vector = weights.new_zeros(self.vocab_size)
        return vector.scatter_reduce_(0, ids[keep], weights[keep], "amax")

    def _rows_of(self, token_ids: list[int], num_rows: int) -> list[int]:
        """The token ids of a ``token_classify`` output's rows: the prompt's,
        less a first BOS and a last EOS, as BOSEOSFilter drops them."""
        if len(token_ids) > num_rows and token_ids[0] == self.bos_token_id:
            token_ids = token_ids[1:]
        if len(token_ids) > num_rows and token_ids[-1] == self.eos_token_id:
            token_ids = token_ids[:-1]
        if len(token_ids) != num_rows:
            raise VLLMServerError(
                f"The model's {self.task!r} output has {num_rows} rows for "
                f"{len(token_ids)} prompt tokens; /embed_sparse needs one "
                "weight per token."
            )
        return token_ids

    def _prompt_text(self, request: EmbedSparseRequest) -> str | None:
        """TEI's `prompt_name`: a prompt of the sentence-transformers config."""
        name = request.prompt_name
        if name is None or (name in self.routes and name not in self.prompts):
            return None
        if not self.prompts:
            raise EmbedSparseError(
                f"Input validation error: `prompt_name` is set to `{name}` but "
                "no prompts were found in the Sentence Transformers configuration"
            )
        if name not in self.prompts:
            raise EmbedSparseError(
                f"Input validation error: `prompt_name` is set to `{name}` but "
                "it was not found in the Sentence Transformers prompts. "
                f"Available prompts: {json.dumps(sorted(self.prompts))}"
            )
        return self.prompts[name]

    def build_tok_params(self, request: EmbedSparseRequest) -> TokenizeParams:
        model_config = self.model_config
        encoder_config = model_config.encoder_config or {}

        truncation_side: str | None = request.truncation_side
        if truncation_side == self.truncation_side:
            # Let the tokenizer truncate: it keeps the special tokens (e.g.
            # [CLS] ... [SEP]), as TEI does. For the other side, `render`
            # does the same by hand.
            truncation_side = None

        return TokenizeParams(
            max_total_tokens=model_config.max_model_len,
            max_output_tokens=0,
            truncate_prompt_tokens=-1 if request.truncates else None,
            truncation_side=truncation_side,  # type: ignore[arg-type]
            do_lower_case=encoder_config.get("do_lower_case", False),
            add_special_tokens=True,
            max_total_tokens_param="max_model_len",
        )

    def get_request_factory_online(
        self, ctx: PoolingServeContext
    ) -> Sequence[AnyRenderParam]:
        request = ctx.request
        if not isinstance(request, EmbedSparseRequest):
            raise ValueError(f"Invalid {self.name} request type")

        inputs = request.input_list
        if not inputs or not all(inputs):
            raise EmbedSparseError(
                "Input validation error: `inputs` cannot be empty", "Empty"
            )
        for text in inputs:
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as e:
                    # A lone surrogate escaped in the JSON ("\ud800"): no
                    # text a tokenizer can take, and invalid JSON to TEI.
                    raise EmbedSparseError(
                        "Failed to parse the request body as JSON: `inputs` "
                        f"has {e.reason} at position {e.start}",
                        status_code=HTTPStatus.BAD_REQUEST,
                    ) from None
        prompt = self._prompt_text(request)
        if prompt is not None:
            # As TEI: token ids are decoded, without their special tokens,
            # and encoded again with the prompt before them.
            tokenizer = self.renderer.get_tokenizer()
            inputs = [
                prompt
                + (
                    text
                    if isinstance(text, str)
                    else tokenizer.decode(text, skip_special_tokens=True)
                )
                for text in inputs
            ]
        tok_params = self.build_tok_params(request)
        if request.truncates and tok_params.truncation_side is None:
            # The tokenizer truncates only after encoding the whole text. Cut
            # what cannot reach the kept tokens first, as the renderer does
            # for an explicit truncation side.
            max_input_tokens = tok_params.max_input_tokens
            if max_input_tokens is not None:
                tokenizer = self.renderer.get_tokenizer()
                max_chars = max_input_tokens * tokenizer.max_chars_per_token
                left = self.truncation_side == "left"
                inputs = [
                    text
                    if not isinstance(text, str) or len(text) <= max_chars
                    else (text[-max_chars:] if left else text[:max_chars])
                    for text in inputs
                ]
        num_requests = len(inputs)
        params_seq = self._params_to_seq(ctx.pooling_params, num_requests)
        seq_lora_requests = self._lora_request_to_seq(ctx.lora_request, num_requests)
        seq_priority = self._priority_to_seq(ctx.priorities, num_requests)

        return [
            EncodeCMPLRenderParams(
                prompts=parse_model_prompt(self.model_config, text),
                tok_params=tok_params,
                prompt_extras=ctx.prompt_extras,
                skip_mm_cache=False,
                params=params_seq[i],
                lora_requests=seq_lora_requests[i],
                priorities=seq_priority[i],
            )
            for i, text in enumerate(inputs)
        ]

    def render(self, render_params: AnyRenderParam) -> PoolingEngineInput:
        prompt = render_params.get("prompts")
        tok_params = render_params.get("tok_params")
        if (
            isinstance(prompt, dict)
            and "prompt" in prompt
            and isinstance(tok_params, TokenizeParams)
            and tok_params.truncate_prompt_tokens is not None
            and tok_params.truncation_side is not None
        ):
            # Truncation on the side the tokenizer does not truncate: encode
            # the text alone, cut it, then add the special tokens, as the
            # tokenizer (and TEI) does on its own side.
            ids = self._truncate(
                prompt["prompt"],
                tok_params,
                special_tokens=not self._is_static_route(render_params["params"]),
            )
            render_params = {  # type: ignore[assignment]
                **render_params,
                "prompts": TokensPrompt(prompt_token_ids=ids),
            }
        elif isinstance(tok_params, TokenizeParams) and self._is_static_route(
            render_params["params"]
        ):
            # sentence-transformers' SparseStaticEmbedding tokenizes without
            # special tokens (the series' PoolingIOProcessor does too; stock
            # vLLM's does not).
            render_params = {  # type: ignore[assignment]
                **render_params,
                "tok_params": replace(tok_params, add_special_tokens=False),
            }
        return super().render(render_params)  # type: ignore[arg-type]

    def _truncate(
        self, text: str, tok_params: TokenizeParams, special_tokens: bool = True
    ) -> list[int]:
        tokenizer = self.renderer.get_tokenizer()
        max_tokens = tok_params.max_truncation_tokens
        assert max_tokens is not None
        left = tok_params.truncation_side == "left"
        max_chars = max_tokens * tokenizer.max_chars_per_token
        text = text[-max_chars:] if left else text[:max_chars]
        if tok_params.do_lower_case:
            text = text.lower()
        if self._around is None:
            self._around = _special_tokens_around(tokenizer)
        prefix, suffix = self._around if special_tokens else ([], [])
        keep = max_tokens - len(prefix) - len(suffix)
        if keep <= 0:
            raise EmbedSparseError(
                f"Input validation error: the maximum length, {max_tokens} "
                "tokens, leaves no room for text beside the special tokens"
            )
        body = tokenizer.encode(text, add_special_tokens=False)
        body = body[len(body) - keep :] if left else body[:keep]
        return [*prefix, *body, *suffix]

    def to_sparse(
        self,
        dense: torch.Tensor,
        top_k: int | None,
        return_tokens: bool,
        threshold: float | None = None,
    ) -> list[dict[str, int | float | str]]:
        """One dense ``[vocab]`` vector as TEI's ``[{index, value}]`` list:
        the non-zero terms (at most ``top_k``, the largest; none below
        ``threshold``), by index."""
        dense = dense.reshape(-1).to(torch.float32)
        if threshold:
            indices = torch.nonzero(dense >= threshold).squeeze(1)
        else:
            indices = torch.nonzero(dense).squeeze(1)
        values = dense[indices]
        if top_k is not None and top_k < indices.numel():
            keep = torch.topk(values, top_k, sorted=False).indices.sort().values
            indices, values = indices[keep], values[keep]

        index_list = indices.tolist()
        # TEI prints float32: the shortest decimal that round-trips the
        # float32, not the longer one of the float64 it widens to.
        value_list = [float(str(v)) for v in values.cpu().numpy()]
        if not return_tokens:
            return [
                {"index": i, "value": v}
                for i, v in zip(index_list, value_list, strict=True)
            ]

        tokens = self.renderer.get_tokenizer().convert_ids_to_tokens(index_list)
        return [
            {"index": i, "value": v, "token": t}
            for i, v, t in zip(index_list, value_list, tokens, strict=True)
        ]


def _sentence_transformers_prompts(model: str, revision: str | None) -> dict:
    """The `prompts` of a sentence-transformers config, as TEI reads them."""
    try:
        config = get_hf_file_to_dict(
            "config_sentence_transformers.json", model, revision
        )
    except Exception:
        logger.debug("No sentence-transformers config for %s", model, exc_info=True)
        return {}
    prompts = (config or {}).get("prompts") or {}
    return {k: v for k, v in prompts.items() if isinstance(v, str)}


def _special_tokens_around(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after one sequence
    ([CLS] and [SEP], <s> and </s>), read off the encoding of a probe."""
    probe = "a b c"
    plain = tokenizer.encode(probe, add_special_tokens=False)
    full = tokenizer.encode(probe, add_special_tokens=True)
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start], full[start + len(plain) :]
    raise EmbedSparseError(
        "Input validation error: cannot truncate on this side: the tokenizer's "
        f"special tokens around a sequence are unclear ({probe!r} encodes to "
        f"{full} with them and to {plain} without)"
    )
