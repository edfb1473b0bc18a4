# SPDX-License-Identifier: Apache-2.0
"""bench/gpu_pooler.py, the GPU benchmark of the pooler against the bare
decoder GEMM for the day a GPU is lent, runs with torch alone: a quick run on
the CPU loads the series' splade_pooling.py from its file with vLLM made
unimportable and reports every case (sequence lengths, fp32/fp16/bf16, max
and sum, the three reductions) against fp64."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "build/vllm/vllm/model_executor/models/splade_pooling.py"


def test_gpu_pooler_script_runs_on_torch_alone(tmp_path: Path):
    out = tmp_path / "gpu.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([
        sys.executable, "-I", str(ROOT / "bench/gpu_pooler.py"), "--device",
        "cpu", "--size", "quick", "--module",
        str(MODULE), "--out",
        str(out)
    ], check=True, env=env, timeout=300)
    rows = json.loads(out.read_text())["rows"]
    cases = {(r["seq_len"], r["dtype"], r["pooling"], r["reduction"])
             for r in rows}
    assert len(cases) == len(rows) == 2 * 3 * 2 * 3
    for r in rows:
        # fp32 exact to rounding; half precision keeps ~3 digits of logits
        # a few units large, the sums in fp32 whatever the dtype.
        bound = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 3e-2}[r["dtype"]]
        assert r["max_rel_err"] < bound, r
        if r["pooling"] == "sum":
            # The pooler's own error: sums in fp32 (on CPU of logits rounded
            # once to the dtype; summed in bf16 they were 0.4-51% off).
            own = {"fp32": 1e-5, "fp16": 1e-4, "bf16": 1e-3}[r["dtype"]]
            assert r["max_rel_err_same_operands"] < own, r
        assert r["pooler_s"] > 0 and r["gemm_s"] > 0
