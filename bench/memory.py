# SPDX-License-Identifier: Apache-2.0
"""Peak extra memory of the pooling step (hidden 768, vocab 30522): the
patched SPLADESparsePooler (.venv's build) vs full [T, V] logits at once.

Each (method, tokens) runs in a fresh Python process: inputs are built and
the method is warmed up on 64 tokens, then the kernel's peak-RSS mark
(VmHWM) is reset through /proc/self/clear_refs and the method runs once;
peak extra = VmHWM after - VmRSS before. Where the reset is not allowed,
ru_maxrss growth is used instead (the `how` field says which).

    python -m bench.memory OUT.json [--quick]
"""
import json
import resource
import subprocess
import sys
from pathlib import Path

VOCAB = 30522
HIDDEN = 768
OURS = (4096, 16384, 32768)
NAIVE = (4096, 16384)  # full [T, V] logits: 2 GB at 16k, not run at 32k


def _proc_mib(path: str, key: str) -> float:
    """A kB figure of /proc/meminfo or /proc/self/status, in MiB."""
    for line in Path(path).read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def child(method: str, num_tokens: int) -> dict:
    """Peak extra MiB of one pooling call, in this (fresh) process."""
    import gc

    import torch

    from bench.pooler import make_head, make_metadata, make_pooler
    torch.set_grad_enabled(False)
    head = make_head(VOCAB, HIDDEN, "float32")
    pooler = make_pooler("patched", head)

    def full_logits(hidden: torch.Tensor, lens: list[int]) -> torch.Tensor:
        weights = torch.log1p(torch.relu(head(hidden)))  # [T, V] at once
        return torch.stack([w.amax(0) for w in weights.split(lens)])

    def run(num: int) -> None:
        lens = [num // 64] * 64
        hidden = torch.randn(num, HIDDEN)
        meta = make_metadata(lens)
        gc.collect()
        state["before"] = _proc_mib("/proc/self/status", "VmRSS")
        state["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        state["reset"] = _reset_peak()
        if method == "ours":
            pooler(hidden, meta)
        else:
            full_logits(hidden, lens)

    state: dict = {}
    run(64)  # warm-up: library buffers and kernels
    run(num_tokens)
    if state["reset"]:
        peak = _proc_mib("/proc/self/status", "VmHWM")
        how, extra = "VmHWM", peak - state["before"]
    else:
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        how, extra = "ru_maxrss", (maxrss - state["maxrss"]) / 1024
    return {
        "method": method,
        "tokens": num_tokens,
        "extra_mib": extra,
        "how": how
    }


def main(out_path: str, quick: bool = False) -> None:
    rows = []
    ours, naive = ((4096,), (4096,)) if quick else (OURS, NAIVE)
    runs = [("ours", t) for t in ours] + [("naive", t) for t in naive]
    for method, num_tokens in runs:
        logits_mib = num_tokens * VOCAB * 4 / 2**20
        avail = _proc_mib("/proc/meminfo", "MemAvailable")
        if method == "naive" and avail < 3 * logits_mib + 1024:
            row = {
                "method": method,
                "tokens": num_tokens,
                "skipped": f"MemAvailable {avail:.0f} MiB"
            }
        else:
            cmd = [sys.executable, "-m", "bench.memory", "child", method]
            out = subprocess.run(cmd + [str(num_tokens)],
                                 check=True,
                                 capture_output=True,
                                 text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
        row["logits_mib"] = logits_mib
        figure = row.get("skipped") or f"{row['extra_mib']:.0f} MiB"
        print(f"bench: memory {method} {num_tokens} tokens: {figure}",
              flush=True)
        rows.append(row)
    Path(out_path).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
    else:
        main(sys.argv[1], "--quick" in sys.argv[2:])
