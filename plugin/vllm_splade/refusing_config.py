# SPDX-License-Identifier: Apache-2.0
"""Where vllm-splade refuses the installed vLLM, a sentence-transformers
sparse encoder folder must not start as whatever its config.json names
(stock vLLM serves BertForMaskedLM as per-token logits and
RobertaForMaskedLM as a dense embedding model): this `hf` parser raises
the reason for such folders and reads every other model as the parser it
wraps did. It reads modules.json itself, with no vLLM internals, since it
runs on a vLLM the rest of the package is not written for."""

import json
from pathlib import Path

# The last part of a sentence-transformers module type that makes a folder
# a sparse encoder (sentence-transformers 5.x and 6.x names, OpenSearch's
# legacy IDF).
SPARSE_MODULES = {"SpladePooling", "SparseStaticEmbedding", "IDF"}


def _read(model: str, name: str, revision: str | None) -> object | None:
    path = Path(model) / name
    if path.is_file():
        return json.loads(path.read_text())
    if Path(model).exists():
        return None
    try:  # a hub id: the file if the repository has one
        from huggingface_hub import hf_hub_download

        return json.loads(Path(hf_hub_download(model, name, revision=revision)).read_text())
    except Exception:
        return None


def is_sparse_encoder(model: str, revision: str | None = None) -> bool:
    """Whether `model` is a sentence-transformers SparseEncoder (a Router of
    sparse modules included)."""
    modules = _read(model, "modules.json", revision)
    if not isinstance(modules, list):
        return False
    types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
    for module in modules:
        if isinstance(module, dict) and str(module.get("type", "")).endswith(".Router"):
            folder = str(module.get("path") or "")
            router = _read(model, str(Path(folder, "router_config.json")), revision)
            if isinstance(router, dict):
                types += [str(t) for t in (router.get("types") or {}).values()]
    return any(t.rsplit(".", 1)[-1] in SPARSE_MODULES for t in types)


def register_refusing_config(reason: str) -> None:
    from vllm.transformers_utils.config import get_config_parser, register_config_parser

    wrapped = get_config_parser("hf")

    class RefusingConfigParser(type(wrapped)):  # type: ignore[misc]
        def parse(self, model, *args, **kwargs):
            # (model, trust_remote_code, revision, code_revision, **kwargs)
            revision = args[1] if len(args) > 1 else kwargs.get("revision")
            if is_sparse_encoder(str(model), revision):
                raise ValueError(f"{model} is a sparse encoder; {reason}")
            return wrapped.parse(model, *args, **kwargs)

    register_config_parser("hf")(RefusingConfigParser)
