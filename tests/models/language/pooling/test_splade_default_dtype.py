# SPDX-License-Identifier: Apache-2.0
"""SPLADE as a bare `vllm serve` runs it: no --dtype, so vLLM's default
(fp16 for an fp32 pooling checkpoint, vllm/config/model.py's
`_resolve_auto_dtype`), and bf16; compiled, warm-up on. The trained
splade-tiny as a SparseEncoder with max and with sum pooling, on a
document of the model's full 512 tokens, against sentence-transformers in
fp32.

The pooler's logits, activation and sums are fp32 in every dtype (a sum of
512 token weights in bf16 kept about three significant digits, and
segment_reduce's in bf16 half the value), so vLLM in half precision must
be within a bound of the fp32 reference and about as close to it as
sentence-transformers' own model in that dtype (within 50%: other kernels
round other logits)."""
import json
import subprocess
import sys
from functools import partial

import pytest
import torch

from tests.checkpoints import ensure_folder, save_sparse_encoder_of
from tests.conftest import ROOT
from tests.models.language.pooling.splade_texts import (PARITY_TEXTS,
                                                        long_passage)

MAX_TOKENS = 512
# Largest error relative to the largest reference weight, per dtype.
BOUNDS = {"float16": 0.02, "bfloat16": 0.05}


def save_sum_pooled_of(masked_lm: str, out: str) -> str:
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import (MLMTransformer,
                                                              SpladePooling)
    SparseEncoder(modules=[MLMTransformer(masked_lm),
                           SpladePooling("sum")], device="cpu").save(out)
    return out


@pytest.fixture(scope="module", params=["max", "sum"])
def folder(request, splade_tiny, tmp_path_factory):
    save = (save_sparse_encoder_of if request.param == "max" else
            save_sum_pooled_of)
    out = tmp_path_factory.mktemp("dtype") / f"splade-tiny-{request.param}"
    return request.param, str(ensure_folder(save, splade_tiny, out))


def texts_of(folder: str) -> list[str]:
    """A document of exactly MAX_TOKENS tokens, [CLS] and [SEP] included,
    and some short texts."""
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer(long_passage(80), add_special_tokens=False)["input_ids"]
    document = tokenizer.decode(ids[:MAX_TOKENS - 2])
    assert len(tokenizer(document)["input_ids"]) == MAX_TOKENS
    return [document] + PARITY_TEXTS[:8]


def sentence_transformers(folder: str, texts: list[str],
                          dtype: torch.dtype) -> torch.Tensor:
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(folder, device="cpu").to(dtype)
    return encoder.encode(texts, convert_to_tensor=True,
                          batch_size=8).to_dense().float()


# A process of its own: a compiled engine in half precision must not share
# process-wide state with the session's fp32 engine.
ENGINE = """
import json, sys
from vllm import LLM
path, dtype, texts, out = sys.argv[1:5]
kwargs = {} if dtype == "auto" else {"dtype": dtype}
llm = LLM(model=path, **kwargs)  # no other flags: compiled, warm-up on
json.dump({
    "dtype": str(llm.model_config.dtype).removeprefix("torch."),
    "compiled": llm.llm_engine.vllm_config.compilation_config.mode > 0,
    "vectors": [o.outputs.embedding
                for o in llm.embed(json.loads(texts), use_tqdm=False)],
}, open(out, "w"))
"""


@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_half_precision_engine_is_close_to_fp32(folder, dtype, tmp_path):
    pooling, path = folder
    texts = texts_of(path)
    out = tmp_path / "vectors.json"
    subprocess.run([
        sys.executable, "-c", ENGINE, path, dtype or "auto",
        json.dumps(texts), str(out)
    ], cwd=ROOT, check=True, timeout=600)
    result = json.loads(out.read_text())
    served = result["dtype"]
    assert dtype is not None or served == "float16", served
    assert result["compiled"]
    got = torch.tensor(result["vectors"])
    reference = partial(sentence_transformers, path, texts)
    want = reference(torch.float32)
    theirs = (reference(getattr(torch, served)) - want).abs().max()
    ours = (got - want).abs()
    scale = want.max()
    print(f"\n{pooling} {served}: vLLM {ours.max() / scale:.2%} of the largest "
          f"weight ({ours[0].max() / want[0].max():.2%} on the "
          f"{MAX_TOKENS}-token document), sentence-transformers "
          f"{theirs / scale:.2%}; terms that appear or vanish: "
          f"{int(((got > 0) != (want > 0)).sum())}")
    assert ours.max() <= BOUNDS[served] * scale
    assert ours[0].max() <= BOUNDS[served] * want[0].max()
    assert ours.max() <= max(1.5 * theirs, 1e-3 * scale)
