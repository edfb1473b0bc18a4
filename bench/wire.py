# SPDX-License-Identifier: Apache-2.0
"""Sparse or dense out of the engine: what carrying SPLADE vectors out of
the engine core dense costs, against carrying them as their non-zero terms.

Two builds side by side (--site NAME=DIR, each a site dir with a vLLM
build), each in a process of its own, the engine core in its own process
(vLLM's default): 1,000 texts of the bench corpus through
`LLM.encode(pooling_task="embed")` on splade-tiny, then every vector's
non-zero terms read out (`outputs.sparse()` where the build has it, else
`torch.nonzero` of the dense `outputs.data`). Best of --rounds, wall time.
Bytes: what vLLM's msgpack encoder makes of each vector (the engine core
sends that to the frontend), median over the texts, and the time to
encode and decode all of them in one process.

Not part of `make bench`: it needs a build with sparse outputs, which the
series no longer has. The one measured (docs/rfcs/sparse-pooling-outputs.md)
is series v2 on 0.34.0 (patches/ at commit 593dacf of this repo: `git am`
them on tag base, `TREE=... scripts/build-wheel.sh cpu`, `uv pip install
--no-deps --target build/v2-site` the wheel); v3 is this series, installed
the same way into build/v3-site.

    python -m bench.wire OUT.json --site v2=build/v2-site --site v3=...
    python -m bench.wire child NAME OUT.json   (one build; internal)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from bench.corpus import make_corpus
from bench.models import ROOT, SPLADE, TINY


def terms(output) -> tuple[torch.Tensor, torch.Tensor]:
    sparse = getattr(output, "sparse", None)
    if callable(sparse):  # a build whose outputs leave the engine sparse
        return sparse()
    indices = torch.nonzero(output.data).squeeze(1)
    return indices, output.data[indices]


def child(name: str, out: str, num_texts: int, rounds: int) -> None:
    from transformers import AutoTokenizer

    from vllm import LLM
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    texts = make_corpus(AutoTokenizer.from_pretrained(TINY), num_texts)
    llm = LLM(model=str(TINY), runner="pooling", dtype="float32",
              hf_overrides=SPLADE, max_model_len=512)
    llm.encode(texts[:32], pooling_task="embed", use_tqdm=False)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        outputs = llm.encode(texts, pooling_task="embed", use_tqdm=False)
        num_terms = [len(terms(o.outputs)[0]) for o in outputs]
        best = min(best, time.perf_counter() - start)
    tensors = [o.outputs.data for o in outputs]
    if getattr(outputs[0].outputs, "is_sparse", False):
        tensors = [o.outputs._raw for o in outputs]  # what the engine sent
    encoder, decoder = MsgpackEncoder(), MsgpackDecoder(torch.Tensor)
    start = time.perf_counter()
    frames = [encoder.encode(t) for t in tensors]
    sizes = [sum(len(memoryview(b).cast("B")) for b in f) for f in frames]
    for f in frames:
        decoder.decode(f)
    codec_s = time.perf_counter() - start
    Path(out).write_text(json.dumps({
        "build": name, "texts": len(texts), "s": best,
        "median_bytes": statistics.median(sizes),
        "median_terms": statistics.median(num_terms),
        "codec_s": codec_s,
    }))


def main(out: str, sites: list[str], num_texts: int, rounds: int) -> None:
    rows = []
    for spec in sites:
        name, site = spec.split("=", 1)
        part = Path(out).with_suffix(f".{name}.json")
        env = dict(os.environ, PYTHONPATH=str(Path(site).resolve()))
        env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        subprocess.run([sys.executable, "-m", "bench.wire", "child", name,
                        str(part), str(num_texts), str(rounds)],
                       check=True, cwd=ROOT, env=env)
        rows.append(json.loads(part.read_text()))
        print(f"bench: wire {name}: {rows[-1]}", flush=True)
    Path(out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        sys.exit()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--site", action="append", required=True)
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    main(args.out, args.site, args.texts, args.rounds)
