# SPDX-License-Identifier: Apache-2.0
"""The SPLADE pooler on a GPU, with torch alone: the series' pooling math
(vllm/model_executor/models/splade_pooling.py, loaded from its file, no
vLLM imported) against the bare decoder GEMM, for the numbers a vLLM
maintainer asks of the masked-LM head's dtype.

For BERT's 30,522-term and XLM-R's 250,002-term vocabularies at hidden
768, and for 2,048 and 16,384 tokens a step (sequences of 128 tokens):
- the pooler (`pool_vocab_blocks` with segment_reduce, as vLLM runs it on
  CUDA) with the head in fp32 (`VLLM_FLOAT32_MATMUL_PRECISION` "highest",
  vLLM's default: no TF32), fp32 with TF32, and bf16;
- the bare decoder GEMM with bias on the same tokens in the same dtype
  (in chunks of 2,048 rows, so that 250k-term logits fit);
- BERT-base's encoder GEMMs (12 layers of QKV, output, and the two MLP
  projections; attention itself left out) in bf16 on the same tokens: how
  the head's time compares with the encoder's;
- peak memory the pooler allocates on top of its inputs, against one
  [tokens, vocab] logits tensor;
- the largest difference of the TF32 and bf16 pooled vectors from the
  fp32 ones (a seeded random head scaled like a trained one's logits).
The first pooler call of each case runs under CUDA's sync debug mode
"error": a hidden host sync fails the run (the timed calls run outside it,
since timing them waits on CUDA events). Times are CUDA-event medians of 5
calls after a warm-up. Sized, by arithmetic, for one call of under 5
minutes on an H100 (not yet run on a GPU; none was lent to this work):

    python bench/gpu_pooler.py --out OUT.json [--module PATH] [--quick]
    python bench/gpu_pooler.py --device cpu --quick   (a smoke run)
"""
import argparse
import importlib.util
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
MODULE = ROOT / "build/vllm/vllm/model_executor/models/splade_pooling.py"
VOCABS = {"bert": 30522, "xlm-r": 250002}
HIDDEN, SEQ_LEN, GEMM_CHUNK = 768, 128, 2048
MODES = ("fp32", "tf32", "bf16")


def load_math(path: Path):
    """splade_pooling.py from its file, with vLLM made unimportable."""
    sys.modules["vllm"] = None  # type: ignore[assignment]
    spec = importlib.util.spec_from_file_location("splade_pooling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def set_mode(mode: str) -> torch.dtype:
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    return torch.bfloat16 if mode == "bf16" else torch.float32


class Timer:

    def __init__(self, device: torch.device):
        self.device = device

    def __call__(self, fn, reps: int = 5) -> float:
        """Median seconds of `reps` calls after one warm-up."""
        fn()
        times = []
        for _ in range(reps):
            if self.device.type == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
        return statistics.median(times)


def make_pool(math, device, x, weight, bias, lens):
    """One pooler call as vLLM's SPLADESparsePooler makes it on `device`:
    offsets copied to the device asynchronously, never read back."""
    offsets = None
    if device.type != "cpu":
        host = torch.cat([lens.new_zeros(1), lens.cumsum(0)])
        offsets = host.pin_memory().to(device, non_blocking=True)
    cols = math.block_columns(len(x), x.element_size(), weight.shape[0], device)

    def pool():
        return math.pool_vocab_blocks(x, weight, bias, lens, offsets, "max",
                                      "relu", cols)

    return pool


def no_sync(device: torch.device, fn):
    """Run `fn` with CUDA's sync debug mode "error" (a host sync raises)."""
    if device.type != "cuda":
        return fn()
    torch.cuda.set_sync_debug_mode("error")
    try:
        return fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def gemm(x, weight, bias):
    out = x.new_empty((min(GEMM_CHUNK, len(x)), weight.shape[0]))
    for first in range(0, len(x), GEMM_CHUNK):
        part = x[first:first + GEMM_CHUNK]
        torch.addmm(bias, part, weight.t(), out=out[:len(part)])


def encoder_gemms(x: torch.Tensor, layers: list[list[torch.Tensor]]) -> None:
    """BERT-base's per-layer dense GEMMs (attention scores left out)."""
    h = x
    for qkv, out, up, down in layers:
        a = h @ qkv.t()
        h = a[:, :HIDDEN] @ out.t()
        h = (h @ up.t()) @ down.t()


@torch.inference_mode()
def run(device: torch.device, module: Path, quick: bool) -> dict:
    math = load_math(module)
    timer = Timer(device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    token_counts = (256, ) if quick else (2048, 16384)
    vocabs = {"bert": 3000} if quick else VOCABS
    rows = []
    bf16 = torch.bfloat16
    layers = [[(torch.randn(*s, generator=gen) * 0.02).to(device, bf16)
               for s in ((3 * HIDDEN, HIDDEN), (HIDDEN, HIDDEN),
                         (4 * HIDDEN, HIDDEN), (HIDDEN, 4 * HIDDEN))]
              for _ in range(1 if quick else 12)]
    for name, vocab in vocabs.items():
        # Scaled so that logits spread like a trained head's (a few units).
        weight32 = (torch.randn(vocab, HIDDEN, generator=gen) * 0.1).to(device)
        bias32 = (torch.randn(vocab, generator=gen) - 2).to(device)
        for num_tokens in token_counts:
            lens = torch.full((num_tokens // SEQ_LEN, ), SEQ_LEN)
            x32 = torch.randn(num_tokens, HIDDEN, generator=gen).to(device)
            encoder_s = timer(partial(encoder_gemms, x32.to(bf16), layers))
            pooled = {}
            for mode in MODES:
                dtype = set_mode(mode)
                x, weight, bias = (t.to(dtype) for t in (x32, weight32, bias32))
                pool = make_pool(math, device, x, weight, bias, lens)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    before = torch.cuda.memory_allocated()
                pooled[mode] = no_sync(device, pool).float()
                peak = (torch.cuda.max_memory_allocated() - before
                        if device.type == "cuda" else None)
                pool_s = timer(pool)  # events sync: timed outside the mode
                gemm_s = timer(partial(gemm, x, weight, bias))
                rows.append(dict(
                    vocab=name, vocab_size=vocab, tokens=num_tokens,
                    mode=mode, pooler_s=pool_s, gemm_s=gemm_s,
                    pooler_over_gemm=pool_s / gemm_s,
                    encoder_gemms_bf16_s=encoder_s,
                    pooler_over_encoder=pool_s / encoder_s,
                    peak_extra_bytes=peak,
                    logits_bytes=num_tokens * vocab * x.element_size()))
                del x, weight, bias, pool
            reference = pooled["fp32"]
            set_mode("fp32")
            expected = torch.log1p(torch.relu(torch.stack([
                (seq @ weight32.t() + bias32).amax(0)
                for seq in x32.split(lens.tolist())
            ])))
            torch.testing.assert_close(reference, expected, rtol=1e-4, atol=1e-4)
            for row in rows[-len(MODES):]:
                diff = (pooled[row["mode"]] - reference).abs()
                row["max_abs_vs_fp32"] = diff.max().item()
                row["terms_flipped_vs_fp32"] = int(
                    ((pooled[row["mode"]] != 0) != (reference != 0)).sum())
    assert "vllm" not in sys.modules or sys.modules["vllm"] is None
    return {"device": (torch.cuda.get_device_name(device)
                       if device.type == "cuda" else "cpu"),
            "torch": torch.__version__, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--module", type=Path, default=MODULE)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(torch.device(args.device), args.module, args.quick)
    result["wall_s"] = time.perf_counter() - started
    for r in result["rows"]:
        print(f"{r['vocab']:6} {r['tokens']:6} {r['mode']:5} "
              f"pooler {r['pooler_s'] * 1e3:8.2f} ms  "
              f"GEMM {r['gemm_s'] * 1e3:8.2f} ms  "
              f"x{r['pooler_over_gemm']:.2f}  "
              f"/encoder x{r['pooler_over_encoder']:.2f}  "
              f"max|d| {r['max_abs_vs_fp32']:.2g}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
