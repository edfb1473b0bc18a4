# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: the real splade-tiny checkpoint, one vLLM engine and one
sentence-transformers reference for it, made once per session."""
import gc
import os
from pathlib import Path

import pytest

from tests.utils import SPLADE_OVERRIDES

ROOT = Path(__file__).resolve().parents[1]
# Engines in-process start in 2-4 s instead of 8-16 s; nothing here needs a
# hub; a small CPU KV cache lets several engines live in one session.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def free_engine(llm) -> None:
    """Drop an in-process engine. The distributed state stays: it is
    process-wide and shared with the session's engine."""
    del llm
    gc.collect()


def make_llm(model: str, **kwargs):
    from vllm import LLM
    kwargs.setdefault("hf_overrides", SPLADE_OVERRIDES)
    kwargs.setdefault("dtype", "float32")
    kwargs.setdefault("enforce_eager", True)
    return LLM(model=model, runner="pooling", **kwargs)


def engine_start_error(model: str, **kwargs) -> str:
    """Start an engine (make_llm) in a fresh process and return what it
    failed with. A failed start inside this process can leave vLLM's
    process-wide state broken for the session's engine and hang the next
    start, so tests that expect one run it apart."""
    import json
    import subprocess
    import sys
    code = ("import json, sys\nfrom tests.conftest import make_llm\n"
            "make_llm(sys.argv[1], **json.loads(sys.argv[2]))")
    proc = subprocess.run(
        [sys.executable, "-c", code, model, json.dumps(kwargs)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0, "the engine started"
    return proc.stderr


@pytest.fixture
def default_vllm_config():
    """Set a default VllmConfig for tests that directly test CustomOps or pathways
    that use get_current_vllm_config() outside of a full engine context.
    """
    from vllm.config import VllmConfig, set_current_vllm_config

    config = VllmConfig()
    with set_current_vllm_config(config):
        yield config


@pytest.fixture(scope="session")
def splade_tiny() -> str:
    path = Path(os.environ.get("SPLADE_TINY", ROOT / "build/models/splade-tiny"))
    if not (path / "model.safetensors").is_file():
        pytest.fail(f"{path} is missing: run `make checkpoint` first")
    return str(path)


@pytest.fixture(scope="session")
def splade_tiny_router(splade_tiny, tmp_path_factory) -> str:
    """splade-tiny as an inference-free SparseEncoder (a Router folder)."""
    from tests.checkpoints import ensure_folder, save_inference_free_of
    out = tmp_path_factory.mktemp("router") / "splade-tiny-inference-free"
    return str(ensure_folder(save_inference_free_of, splade_tiny, out))


@pytest.fixture(scope="session")
def splade_llm(splade_tiny):
    llm = make_llm(splade_tiny)
    yield llm
    free_engine(llm)


@pytest.fixture(scope="session")
def splade_st(splade_tiny):
    from sentence_transformers import SparseEncoder
    return SparseEncoder(splade_tiny, device="cpu")


def vllm_vectors(llm, texts):
    import torch
    return torch.tensor(
        [o.outputs.embedding for o in llm.embed(texts, use_tqdm=False)])


def st_vectors(encoder, texts):
    return encoder.encode(texts, convert_to_tensor=True,
                          batch_size=16).to_dense().float()
