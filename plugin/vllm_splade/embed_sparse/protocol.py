# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Request, response and errors of the TEI-compatible ``/embed_sparse``.

Follows text-embeddings-inference's ``EmbedSparseRequest``:
https://huggingface.github.io/text-embeddings-inference/#/Text%20Embeddings%20Inference/embed_sparse
The response is TEI's: one list of ``{"index": int, "value": float}`` per
input, holding the non-zero terms in ascending ``index`` order. Errors are
TEI's ``{"error": str, "error_type": str}``, with TEI's status per kind.
"""

from http import HTTPStatus
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from vllm.exceptions import VLLMClientError

# TEI decodes token ids as u32.
TokenIds = list[Annotated[int, Field(ge=0, le=2**32 - 1)]]


class EmbedSparseRequest(BaseModel):
    # TEI ignores the fields it does not know, so requests written for it
    # (e.g. with /embed's `normalize`) are accepted here as they are there.
    model_config = ConfigDict(extra="ignore", strict=True)

    inputs: str | TokenIds | list[str | TokenIds] = Field(
        description=(
            "A text, a list of token ids, or a list of texts and token-id lists."
        ),
    )
    truncate: bool | None = Field(
        default=None,
        description=(
            "Truncate inputs longer than the model's maximum length instead "
            "of refusing them. `null` or unset: TEI 1.9's default "
            "(`--auto-truncate`), true."
        ),
    )
    truncation_direction: Literal["Right", "Left", "right", "left"] = Field(
        default="Right",
        description=(
            "Which end of an input `truncate` removes tokens from; the "
            "special tokens stay."
        ),
    )
    prompt_name: str | None = Field(
        default=None,
        description=(
            "The name of a prompt in the model's sentence-transformers "
            "configuration, prepended to every input."
        ),
    )
    model: str | None = None

    # vLLM extras
    top_k: Annotated[int, Field(ge=1)] | None = Field(
        default=None,
        description=(
            "Keep only the `top_k` largest weights of each vector (the same "
            "terms as sentence-transformers' `max_active_dims`)."
        ),
    )
    threshold: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = Field(
        default=None,
        description=(
            "Drop the terms whose weight is below `threshold` (a search "
            "engine's term-score or token-weight threshold). With `top_k`, "
            "both apply."
        ),
    )
    priority: int = Field(
        default=0,
        ge=-(2**63),
        le=2**63 - 1,
        description=(
            "The priority of the request (lower means earlier handling; "
            "default: 0), e.g. a larger number for bulk indexing than for "
            "queries. Any priority other than 0 is refused unless the "
            "server runs with --scheduling-policy priority."
        ),
    )
    return_tokens: bool = Field(
        default=False,
        description="Add the vocabulary token of each index as `token`.",
    )

    @property
    def input_list(self) -> list[str | list[int]]:
        # TEI reads a flat list of integers as one input of token ids.
        if isinstance(self.inputs, str) or (
            self.inputs and isinstance(self.inputs[0], int)
        ):
            return [self.inputs]  # type: ignore[list-item]
        return self.inputs  # type: ignore[return-value]

    @property
    def truncates(self) -> bool:
        """TEI 1.9: unset or null truncates (`--auto-truncate` defaults to
        true since 1.9.0, #829); only an explicit false refuses."""
        return self.truncate is not False

    @property
    def truncation_side(self) -> Literal["left", "right"]:
        return "left" if self.truncation_direction.lower() == "left" else "right"


class SparseValue(BaseModel):
    index: int
    value: float
    token: str | None = None


# "Unauthorized" is ours: TEI 1.9.3 answers a request without its API key
# with a bare 401 (router/src/http/server.rs, the `auth` layer); the body
# keeps TEI's shape with vLLM's word for it ({"error": "Unauthorized"}).
TEIErrorType = Literal[
    "Unhealthy",
    "Backend",
    "Overloaded",
    "Validation",
    "Tokenizer",
    "Empty",
    "Unauthorized",
]


class TEIErrorResponse(BaseModel):
    """TEI's error body, which TEI's clients read (``error`` a string)."""

    error: str
    error_type: TEIErrorType


# TEI's router: `impl From<&ErrorType> for StatusCode`.
TEI_ERROR_STATUS: dict[str, HTTPStatus] = {
    "Unhealthy": HTTPStatus.SERVICE_UNAVAILABLE,
    "Backend": HTTPStatus.FAILED_DEPENDENCY,
    "Overloaded": HTTPStatus.TOO_MANY_REQUESTS,
    # 422 since TEI 1.9.0 (#818); 413 up to 1.8.x.
    "Validation": HTTPStatus.UNPROCESSABLE_ENTITY,
    "Tokenizer": HTTPStatus.UNPROCESSABLE_ENTITY,
    "Empty": HTTPStatus.BAD_REQUEST,
    "Unauthorized": HTTPStatus.UNAUTHORIZED,
}


class EmbedSparseError(VLLMClientError):
    """A refusal of ``/embed_sparse`` as TEI words and classifies it."""

    def __init__(
        self,
        message: str,
        error_type: TEIErrorType = "Validation",
        status_code: HTTPStatus | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.status_code = status_code or TEI_ERROR_STATUS[error_type]
