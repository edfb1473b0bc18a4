# SPDX-License-Identifier: Apache-2.0
"""`/embed_sparse` behind vLLM's API key.

vLLM's `AuthenticationMiddleware` (vllm/entrypoints/serve/middleware/
authenticate.py, 0.34) checks `--api-key` / `VLLM_API_KEY` only on paths
under /v1, /v2, /inference and /cohere, and leaves a plugin's other routes
to the plugin. TEI's `--api-key` covers every inference route, so this
route checks the key itself, with vLLM's own check of the bearer token."""

from argparse import Namespace
from collections.abc import Callable

from starlette.datastructures import Headers
from vllm import envs
from vllm.entrypoints.serve.middleware.authenticate import AuthenticationMiddleware

KeyCheck = Callable[[Headers], bool]


def _no_app(scope, receive, send):  # never called: only verify_token is used
    raise NotImplementedError


def api_key_check(args: Namespace) -> KeyCheck | None:
    """vLLM's check of a request's bearer token against the server's keys,
    read as vLLM reads them (`--api-key` wins over `VLLM_API_KEY`); None
    when the server has none."""
    keys = [key for key in (getattr(args, "api_key", None) or [envs.VLLM_API_KEY]) if key]
    if not keys:
        return None
    return AuthenticationMiddleware(_no_app, tokens=keys).verify_token
