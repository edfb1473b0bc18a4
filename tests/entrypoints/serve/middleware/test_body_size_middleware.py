# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project

from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI, Request
from starlette.testclient import TestClient

from vllm.entrypoints.serve.middleware.body_size import (
    TEI_PAYLOAD_LIMIT,
    RequestBodySizeMiddleware,
    body_size_limits,
)


def _client(max_size: int | None, route_limits: dict[str, int] | None = None):
    app = FastAPI()
    app.add_middleware(
        RequestBodySizeMiddleware, max_size=max_size, route_limits=route_limits
    )

    @app.post("/echo")
    @app.post("/embed_sparse")
    async def echo(request: Request):
        return {"size": len(await request.body())}

    return TestClient(app)


def _chunks(body: bytes, size: int = 7):
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize("chunked", [False, True])
def test_limit(chunked: bool):
    client = _client(max_size=100)
    for size in (0, 1, 100):
        body = b"x" * size
        response = client.post("/echo", content=_chunks(body) if chunked else body)
        assert response.status_code == 200, response.text
        assert response.json() == {"size": size}

    response = client.post(
        "/echo", content=_chunks(b"x" * 101) if chunked else b"x" * 101
    )
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == 413
    assert "larger than 100 bytes" in error["message"]
    assert "--max-request-body-size" in error["message"]


def test_route_limits_only_apply_to_their_routes():
    client = _client(max_size=None, route_limits={"/embed_sparse": 10})
    assert client.post("/embed_sparse", content=b"x" * 10).status_code == 200
    assert client.post("/embed_sparse", content=b"x" * 11).status_code == 413
    assert client.post("/echo", content=b"x" * 1000).status_code == 200


def test_lifespan_runs():
    # The app's startup and shutdown must still run behind the middleware.
    events = []

    @asynccontextmanager
    async def lifespan(app):
        events.append("startup")
        yield
        events.append("shutdown")

    app = FastAPI(lifespan=lifespan)
    app.add_middleware(RequestBodySizeMiddleware, max_size=10)
    with TestClient(app):
        assert events == ["startup"]
    assert events == ["startup", "shutdown"]


def test_default_limits():
    # TEI's payload limit on its route unless the flag says otherwise.
    assert body_size_limits(None, has_tei_routes=True) == (
        None,
        {"/embed_sparse": TEI_PAYLOAD_LIMIT},
    )
    assert body_size_limits(None, has_tei_routes=False) == (None, {})
    assert body_size_limits(5, has_tei_routes=True) == (5, {})
    assert body_size_limits(0, has_tei_routes=True) == (None, {})
