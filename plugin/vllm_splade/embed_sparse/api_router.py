# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project

from collections.abc import Awaitable, Callable, Coroutine
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Message
from vllm.entrypoints.serve.exception_handling.error_response import (
    create_error_response,
)
from vllm.entrypoints.serve.exception_handling.handlers.vllm_error import (
    engine_error_handler,
)
from vllm.entrypoints.serve.utils.api_utils import (
    create_json_response,
    load_aware_call,
    validate_json_request,
    with_cancellation,
)
from vllm.exceptions import (
    GenerationError,
    GracefulHTTPError,
    MaxQueuedTokensError,
    QueueOverflowError,
    VLLMClientError,
)
from vllm.logger import init_logger
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

from .protocol import (
    TEI_ERROR_STATUS,
    EmbedSparseError,
    EmbedSparseRequest,
    SparseValue,
    TEIErrorResponse,
    TEIErrorType,
)
from .serving import ServingEmbedSparse

logger = init_logger(f"vllm.{__name__}")

# TEI's --payload-limit default: larger bodies are refused with a 413.
MAX_BODY_BYTES = 2_000_000


class EmbedSparseRoute(APIRoute):
    """TEI's answers for `/embed_sparse`: a request without the server's
    API key refused with a 401 before its body is read, every error in
    TEI's body and with TEI's status for its kind, and a request body over
    MAX_BODY_BYTES refused with a 413 without reading it whole: at once
    from its Content-Length, or, for a chunked body, as soon as the bytes
    read pass the limit (the connection then closes, the rest is never
    read)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def tei_handler(request: Request) -> Response:
            if not _authorized(request):
                return _tei_response("Unauthorized", "Unauthorized")
            try:
                length = request.headers.get("content-length", "")
                if length.isdigit():
                    if int(length) > MAX_BODY_BYTES:
                        return _too_large()
                    return await handler(request)
                body = bytearray()
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        return _too_large()
                replay = _replay(bytes(body), request)
                return await handler(Request(request.scope, replay))
            except ClientDisconnect:
                return Response(status_code=499)  # nobody to answer
            except (EngineGenerateError, EngineDeadError) as e:
                # vLLM's handler logs it and shuts a dead engine's server
                # down; the client gets TEI's body with its status.
                response = await engine_error_handler(request, e)
                return tei_error_response(e, response.status_code)
            except Exception as e:
                return tei_error_response(e)

        return tei_handler


def _authorized(request: Request) -> bool:
    """Whether the request may use the route: the server has no API key, or
    the request carries one of its keys. Locked until the plugin's
    `init_state` has read the server's keys."""
    state = request.app.state
    if not hasattr(state, "embed_sparse_key_check"):
        return False
    check = state.embed_sparse_key_check
    return check is None or check(request.headers)


def _replay(body: bytes, request: Request) -> Callable[[], Awaitable[Message]]:
    """The receive channel of a request whose body was read: the body once,
    then the connection's own messages (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await request.receive()

    return receive


def _too_large() -> Response:
    response = _tei_response(
        "Failed to buffer the request body: length limit exceeded "
        f"({MAX_BODY_BYTES} bytes)",
        "Validation",
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    )
    response.headers["Connection"] = "close"
    return response


def _tei_response(
    message: str, error_type: TEIErrorType, status: HTTPStatus | int | None = None
) -> Response:
    # A lone surrogate echoed from the request cannot be encoded as JSON.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    body = TEIErrorResponse(error=message, error_type=error_type)
    return create_json_response(
        body, status_code=int(status or TEI_ERROR_STATUS[error_type])
    )


def tei_error_response(exc: Exception, status: int | None = None) -> Response:
    """An exception raised on `/embed_sparse` as TEI would answer it."""
    if isinstance(exc, EmbedSparseError):
        return _tei_response(exc.message, exc.error_type, exc.status_code)
    if isinstance(exc, RequestValidationError):
        return _tei_response(*_request_error(exc))
    if isinstance(exc, HTTPException):
        return _tei_response(str(exc.detail), "Validation", exc.status_code)
    if isinstance(exc, (QueueOverflowError, MaxQueuedTokensError)):
        return _tei_response("Model is overloaded", "Overloaded")
    if isinstance(exc, EngineDeadError):
        return _tei_response(exc.CLIENT_MESSAGE, "Unhealthy", status)
    error = create_error_response(exc).error
    code = status or error.code
    if isinstance(exc, VLLMClientError) and code == HTTPStatus.BAD_REQUEST:
        # vLLM's validation errors (too many tokens, token ids out of the
        # vocabulary, ...) are TEI's Validation errors.
        return _tei_response(f"Input validation error: {error.message}", "Validation")
    if code < 500:
        return _tei_response(error.message, "Validation", code)
    if isinstance(exc, (GracefulHTTPError, GenerationError, EngineGenerateError)):
        # Expected under load or logged by vLLM's own handler already.
        unhealthy = code == HTTPStatus.SERVICE_UNAVAILABLE
        kind: TEIErrorType = "Unhealthy" if unhealthy else "Backend"
        return _tei_response(error.message, kind, code)
    # A fault of the server stays a 5xx (TEI: 424), for load balancers and
    # metrics to see it as one.
    logger.exception("/embed_sparse failed", exc_info=exc)
    return _tei_response(error.message, "Backend", code)


def _request_error(exc: RequestValidationError) -> tuple[str, TEIErrorType, int]:
    """A body that FastAPI cannot read into the request, with the status and
    wording of TEI's JSON extractor."""
    (error, *_) = exc.errors() or ["invalid request"]
    if not isinstance(error, dict):
        # validate_json_request's refusal of another media type.
        return (
            "Expected request with `Content-Type: application/json`",
            "Validation",
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        )
    if error.get("type") == "json_invalid" or (
        error.get("type") == "missing" and tuple(error.get("loc", ())) == ("body",)
    ):
        detail = (error.get("ctx") or {}).get("error", error.get("msg"))
        return (
            f"Failed to parse the request body as JSON: {detail}",
            "Validation",
            HTTPStatus.BAD_REQUEST,
        )
    loc = [str(part) for part in error.get("loc", ())[1:]]
    if loc[:1] == ["inputs"] and len(loc) > 1 and not loc[1].isdigit():
        # A union's branches: name what `inputs` may be instead.
        message = (
            "inputs: expected a string, a list of token ids (0 to 2^32 - 1), "
            "or a list of strings and token-id lists"
        )
    else:
        message = (
            f"{'.'.join(loc)}: {error.get('msg')}" if loc else str(error.get("msg"))
        )
    return (
        f"Failed to deserialize the JSON body into the target type: {message}",
        "Validation",
        HTTPStatus.UNPROCESSABLE_ENTITY,
    )


router = APIRouter(route_class=EmbedSparseRoute)


def embed_sparse(request: Request) -> ServingEmbedSparse:
    handler = getattr(request.app.state, "serving_embed_sparse", None)
    if handler is None:
        # TEI's answer on a model without SPLADE pooling.
        raise EmbedSparseError(
            "Model is not an embedding model with SPLADE pooling", "Backend"
        )
    return handler


@router.post(
    "/embed_sparse",
    dependencies=[Depends(validate_json_request)],
    responses={
        HTTPStatus.OK.value: {"model": list[list[SparseValue]]},
        HTTPStatus.BAD_REQUEST.value: {"model": TEIErrorResponse},
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE.value: {"model": TEIErrorResponse},
        HTTPStatus.UNSUPPORTED_MEDIA_TYPE.value: {"model": TEIErrorResponse},
        HTTPStatus.UNPROCESSABLE_ENTITY.value: {"model": TEIErrorResponse},
        HTTPStatus.TOO_MANY_REQUESTS.value: {"model": TEIErrorResponse},
        HTTPStatus.INTERNAL_SERVER_ERROR.value: {"model": TEIErrorResponse},
        HTTPStatus.SERVICE_UNAVAILABLE.value: {"model": TEIErrorResponse},
    },
)
@with_cancellation
@load_aware_call
async def create_embed_sparse(
    request: EmbedSparseRequest,
    raw_request: Request,
):
    handler = embed_sparse(raw_request)
    return await handler(request, raw_request)
