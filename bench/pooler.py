# SPDX-License-Identifier: Apache-2.0
"""The pooling step alone: the patched SPLADESparsePooler vs upstream's
(a Python loop per request) vs the bare decoder GEMM.

64 requests of equal length through `SPLADESparsePooler` (embed, max,
every token counted) on a seeded random `BertMLMHead`: a BERT vocabulary
(30,522) at hidden 128 and 768, 4,096 and 16,384 tokens in one call and
4,096 in 8 calls of 512 tokens (the steps in which vLLM's CPU scheduler
feeds the pooler); XLM-R's 250,002-term vocabulary at hidden 768 in 8
calls of 512; and the 512-token steps again with the head in bf16. The
floor is the bare decoder GEMM with bias on the same tokens in 512-token
chunks, in the head's dtype. The patched pooler runs in .venv's patched
vLLM build, upstream's in the unpatched build of the same pin (--site),
each in a process of its own (PYTHONPATH), one process per build and
round, the builds alternating; the GEMM runs in both and the best is kept.
Each process checks its pooler against log1p(relu(head(h))).amax per
request and warms every method up once per head. Best of --rounds; wall
time, and process CPU time (steadier when other jobs share the cores).

    python -m bench.pooler OUT.json [--rounds N] [--quick]
    python -m bench.pooler child {patched|upstream} OUT.json [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from bench.models import BENCH, ROOT

UPSTREAM_SITE = ROOT / "build/vllm-base-site"
NUM_REQUESTS = 64
BERT_VOCAB, XLMR_VOCAB = 30522, 250002
# (vocab, hidden, dtype): the heads; per head, (tokens in all, tokens per
# pooler call): one call for the whole batch, and the 512-token steps in
# which vLLM's CPU scheduler feeds the pooler.
STEPS = ((4096, 512), )
CASES = {
    (BERT_VOCAB, 128, "float32"): ((4096, 4096), (16384, 16384), (4096, 512)),
    (BERT_VOCAB, 768, "float32"): ((4096, 4096), (16384, 16384), (4096, 512)),
    (XLMR_VOCAB, 768, "float32"): STEPS,
    (BERT_VOCAB, 128, "bfloat16"): STEPS,
    (BERT_VOCAB, 768, "bfloat16"): STEPS,
}
QUICK_CASES = {
    (BERT_VOCAB, 128, "float32"): ((1024, 1024), (1024, 512)),
    (BERT_VOCAB, 128, "bfloat16"): ((1024, 512), ),
}
BUILDS = {"patched": "splade", "upstream": "base"}


def make_head(vocab: int, hidden: int, dtype: str):
    """A seeded random masked-LM head of the given shape and dtype (either
    build's BertMLMHead: the patched one also takes the activation and
    dtype)."""
    from vllm.config import VllmConfig, set_current_vllm_config
    try:  # the series keeps the head apart from bert.py
        from vllm.model_executor.models.masked_lm import BertMLMHead
    except ImportError:
        from vllm.model_executor.models.bert import BertMLMHead
    torch.manual_seed(0)
    with set_current_vllm_config(VllmConfig()):
        head = BertMLMHead(hidden_size=hidden,
                           vocab_size=vocab,
                           layer_norm_eps=1e-12).eval()
    torch.nn.init.normal_(head.dense.weight, std=0.02)
    torch.nn.init.normal_(head.decoder.weight, std=0.02)
    torch.nn.init.normal_(head.decoder.bias, std=0.02)
    return head.to(getattr(torch, dtype))


def dense(pooled) -> torch.Tensor:
    """The pooled vectors as one dense tensor: the patched pooler returns
    a sparse tensor per request, upstream's one dense tensor."""
    if isinstance(pooled, torch.Tensor):
        return pooled
    return torch.stack([p.to_dense() for p in pooled])


def make_pooler(build: str, head):
    """SPLADESparsePooler with max pooling and every token counted."""
    try:  # the series keeps SPLADE in its own module
        from vllm.model_executor.models.splade import SPLADESparsePooler
    except ImportError:
        from vllm.model_executor.models.bert import SPLADESparsePooler
    if build == "patched":
        return SPLADESparsePooler(head, pooling="max", activation="relu")
    # Upstream drops [CLS]/[SEP] only when the config names their ids; BERT
    # configs (splade-tiny's too) do not, so every token counts.
    return SPLADESparsePooler(head,
                              cls_token_id=None,
                              sep_token_id=None,
                              pooling="max",
                              remove_cls_sep=True)


def make_metadata(lens: list[int]):
    """PoolingMetadata for whole prompts of `lens` tokens, embed task,
    token ids included (upstream's pooler reads them), cursor built."""
    from vllm.pooling_params import PoolingParams
    from vllm.v1.pool.metadata import PoolingMetadata, PoolingStates
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 2000, (len(lens), max(lens)), generator=gen)
    meta = PoolingMetadata(
        prompt_lens=torch.tensor(lens),
        prompt_token_ids=ids,
        prompt_token_ids_cpu=ids,
        pooling_params=[PoolingParams(task="embed") for _ in lens],
        pooling_states=[PoolingStates() for _ in lens],
    )
    meta.build_pooling_cursor(np.array(lens), torch.tensor(lens),
                              torch.device("cpu"))
    return meta


def reference(head, hidden: torch.Tensor, lens: list[int]) -> torch.Tensor:
    """Per request: the head's logits, log1p(relu), max over tokens."""
    return torch.stack([
        torch.log1p(torch.relu(head(seq))).amax(0)
        for seq in hidden.split(lens)
    ])


def gemm(head, hidden: torch.Tensor, chunk: int = 512) -> None:
    """The bare decoder GEMM with bias on all tokens, `chunk` rows a time."""
    weight = head.decoder.weight
    buf = hidden.new_empty((chunk, weight.shape[0]))
    for first in range(0, hidden.shape[0], chunk):
        part = hidden[first:first + chunk]
        torch.addmm(head.decoder.bias, part, weight.t(),
                    out=buf[:part.shape[0]])


def timed(fn: Callable[[], object]) -> dict[str, float]:
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return {"s": time.perf_counter() - start,
            "cpu_s": time.process_time() - cpu}


def in_calls(fn: Callable[..., torch.Tensor], calls: list[tuple]) -> None:
    """Run `fn` on each call's arguments, as vLLM runs a pooler per step."""
    for args in calls:
        fn(*args)


@torch.inference_mode()
def child(build: str, out_path: str, quick: bool) -> None:
    """One round of every case with this build's pooler and the GEMM."""
    from importlib.metadata import version
    found = version("vllm")
    if f"+{BUILDS[build]}." not in found:
        raise SystemExit(f"bench: pooler {build} wants a +{BUILDS[build]} "
                         f"build of vLLM, found {found}")
    rows = []
    for (vocab, hidden_size, dtype), cases in (QUICK_CASES if quick
                                               else CASES).items():
        head = make_head(vocab, hidden_size, dtype)
        pooler = make_pooler(build, head)
        warm = True
        for num_tokens, per_call in cases:
            seq_len = num_tokens // NUM_REQUESTS
            lens = [seq_len] * (per_call // seq_len)
            meta = make_metadata(lens)
            hidden = torch.randn(num_tokens, hidden_size,
                                 dtype=getattr(torch, dtype))
            steps = hidden.split(per_call)
            methods = {
                build: partial(in_calls, pooler, [(h, meta) for h in steps]),
                "gemm": partial(gemm, head, hidden),
            }
            if warm:  # once per method and head
                tol = 1e-4 if dtype == "float32" else 2e-2
                torch.testing.assert_close(dense(pooler(steps[0], meta)),
                                           reference(head, steps[0], lens),
                                           rtol=tol,
                                           atol=tol)
                for fn in methods.values():
                    fn()
                warm = False
            row = dict(vocab=vocab, hidden=hidden_size, dtype=dtype,
                       tokens=num_tokens, per_call=per_call, vllm=found)
            for name, fn in methods.items():
                row.update({f"{name}_{k}": v for k, v in timed(fn).items()})
            rows.append(row)
    Path(out_path).write_text(json.dumps(rows))


def main(out_path: str, rounds: int, quick: bool, site: Path) -> None:
    if not (site / "vllm").is_dir():
        raise SystemExit(f"bench: no unpatched vLLM build in {site}")
    best: dict[tuple, dict] = {}
    BENCH.mkdir(parents=True, exist_ok=True)
    for _ in range(rounds):  # the builds alternate; the best is kept
        for build in BUILDS:
            part = BENCH / f"pooler-{build}.part.json"
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            if build == "upstream":
                env["PYTHONPATH"] = str(site)
            cmd = [sys.executable, "-m", "bench.pooler", "child", build,
                   str(part)] + ["--quick"] * quick
            subprocess.run(cmd, check=True, cwd=ROOT, env=env)
            for r in json.loads(part.read_text()):
                key = tuple(r[k] for k in ("vocab", "hidden", "dtype",
                                           "tokens", "per_call"))
                row = best.setdefault(
                    key, dict(vocab=r["vocab"], hidden=r["hidden"],
                              dtype=r["dtype"], tokens=r["tokens"],
                              per_call=r["per_call"]))
                row[build + "_vllm"] = r.pop("vllm")
                for key, value in r.items():
                    if key.endswith("_s"):
                        row[key] = min(row.get(key, value), value)
    rows = list(best.values())
    for row in rows:
        print(f"bench: pooler vocab {row['vocab']}, hidden {row['hidden']}, "
              f"{row['dtype']}, {row['tokens']} tokens "
              f"in calls of {row['per_call']}: " +
              ", ".join(f"{m} {row[m + '_s']:.3f} s"
                        for m in ("patched", "upstream", "gemm")),
              flush=True)
    Path(out_path).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    if sys.argv[1:2] == ["child"]:
        parser.add_argument("child")
        parser.add_argument("build", choices=tuple(BUILDS))
        parser.add_argument("out")
        parser.add_argument("--quick", action="store_true")
        args = parser.parse_args()
        child(args.build, args.out, args.quick)
        sys.exit()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="small cases, for a smoke run")
    parser.add_argument("--site", type=Path, default=UPSTREAM_SITE,
                        help="site dir of the unpatched vLLM build")
    args = parser.parse_args()
    main(args.out, args.rounds, args.quick, args.site)
