# SPDX-License-Identifier: Apache-2.0
"""What stock vLLM needs done otherwise than the series does it: the route
of an inference-free sparse encoder (a sentence-transformers Router folder).

The series adds `PoolingParams.route`, checked and resolved to the model's
default at request time. Stock vLLM's PoolingParams has no such field, so
the route rides in `extra_kwargs["route"]`: `route_pooling_params` builds
params that pick a route on either vLLM, and `pooling_route` (which the
shipped `models/splade.py` uses in place of the series' function of that
name) reads it back in the pooler and the endpoint."""

from typing import Any

from vllm import PoolingParams


def has_route_field() -> bool:
    """Whether vLLM's PoolingParams has the series' `route` field."""
    return "route" in PoolingParams.__struct_fields__


def route_pooling_params(route: str | None = None, **kwargs: Any) -> PoolingParams:
    """PoolingParams that pick `route`: the series' field where vLLM has it,
    `extra_kwargs["route"]` on stock vLLM. On stock nothing checks the name:
    one that is not a route of the model takes its model route."""
    if route is None:
        return PoolingParams(**kwargs)
    if has_route_field():
        return PoolingParams(route=route, **kwargs)
    extra_kwargs = {**(kwargs.pop("extra_kwargs", None) or {}), "route": route}
    return PoolingParams(extra_kwargs=extra_kwargs, **kwargs)


def pooling_route(params: PoolingParams, default_route: str | None) -> str | None:
    """A sequence's route: the series' `PoolingParams.route`, else a string
    in `extra_kwargs["route"]`; unset, the model's default route."""
    route = getattr(params, "route", None)
    if route is None and params.extra_kwargs:
        extra = params.extra_kwargs.get("route")
        route = extra if isinstance(extra, str) else None
    return default_route if route is None else route
