# SPDX-License-Identifier: Apache-2.0
"""bench/gpu_pooler.py, the GPU benchmark of the pooler against the bare
decoder GEMM for the day a GPU is lent, runs with torch alone: a quick run on
the CPU loads the series' splade_pooling.py from its file with vLLM made
unimportable, checks its fp32 pooler against the formula, and reports the
TF32 and bf16 heads against the fp32 one."""
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
        "cpu", "--quick", "--module",
        str(MODULE), "--out",
        str(out)
    ], check=True, env=env, timeout=300)
    rows = json.loads(out.read_text())["rows"]
    assert [r["mode"] for r in rows] == ["fp32", "tf32", "bf16"]
    assert rows[0]["max_abs_vs_fp32"] == 0
    # bf16 keeps ~3 significant digits of logits a few units large.
    assert 0 < rows[2]["max_abs_vs_fp32"] < 0.1
    assert all(r["pooler_s"] > 0 and r["gemm_s"] > 0 for r in rows)
