# SPDX-License-Identifier: Apache-2.0
"""The SPLADE pooler on a GPU, with torch alone: the series' pooling math
(vllm/model_executor/models/splade_pooling.py, loaded from its file, no
vLLM imported) against the bare decoder GEMM, for the numbers a vLLM
maintainer asks of the pooler before running it on an H100.

For BERT's 30,522-term and XLM-R's 250,002-term vocabularies at hidden
768, 16,384 tokens a step as 32 sequences of 512 tokens or 2 documents of
8,192, each case in fp32 (vLLM's default matmul precision, no TF32), fp16
and bf16, max and sum pooling:
- the pooler (`pool_vocab_blocks`) with each reduction: `segment` as vLLM
  runs it on CUDA (`reduction_offsets`: chunks of 256 tokens, then each
  sequence's chunks), `segment-1` (one level, a thread walking a whole
  sequence, as before) and, on CPU only, `scatter` (as vLLM runs it
  there: its index is made on the host);
- the bare decoder GEMM with bias on the same tokens in the same dtype, in
  chunks of 2,048 rows so that 250k-term logits fit;
- BERT-base's encoder GEMMs (12 layers; attention scores left out) in bf16
  on the same tokens: how the head's time compares with the encoder's;
- peak memory the pooler allocates on top of its inputs, against one
  [tokens, vocab] logits tensor in the dtype;
- the largest error of the pooled weights, relative to the largest weight,
  against fp64 on the fp32 operands (what a user sees) and on the same
  operands rounded to the dtype (the pooler's own error: on CUDA, where
  the GEMM writes fp32 logits, about 1e-6), and the terms that appear or
  vanish.
The first pooler call of each case runs under CUDA's sync debug mode
"error": a hidden host sync fails the run (timed calls run outside it,
since timing waits on CUDA events). Times are medians of 3 calls after a
warm-up. Sized by arithmetic for one call of under 5 minutes on an H100
(not yet run on a GPU; none was lent to this work):

    python bench/gpu_pooler.py --out OUT.json [--module PATH]
    python bench/gpu_pooler.py --device cpu --size small  (hidden 128, 8,192 tokens)
    python bench/gpu_pooler.py --device cpu --size quick  (a smoke run)
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
# size -> (vocabularies, hidden, tokens a step, sequence lengths, encoder layers)
SIZES = {
    "full": ({"bert": 30522, "xlm-r": 250002}, 768, 16384, (512, 8192), 12),
    "small": ({"bert": 30522}, 128, 8192, (512, 8192), 2),
    "quick": ({"bert": 3000}, 64, 1024, (128, 1024), 1),
}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
REDUCTIONS = ("segment", "segment-1", "scatter")
GEMM_CHUNK = 2048


def load_math(path: Path):
    """splade_pooling.py from its file, with vLLM made unimportable."""
    sys.modules["vllm"] = None  # type: ignore[assignment]
    spec = importlib.util.spec_from_file_location("splade_pooling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Timer:

    def __init__(self, device: torch.device):
        self.device = device

    def __call__(self, fn, reps: int = 3) -> float:
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


def offsets_for(math, device, lens, reduction):
    """The offsets vLLM's SPLADESparsePooler passes for `reduction`, copied
    to the device asynchronously and never read back."""
    if reduction == "scatter":
        return None
    chunk = 1 << 62 if reduction == "segment-1" else math.REDUCE_CHUNK_TOKENS
    host = math.reduction_offsets(lens, chunk)
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


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
    """BERT's per-layer dense GEMMs (attention scores left out)."""
    h = x
    hidden = x.shape[1]
    for qkv, out, up, down in layers:
        a = h @ qkv.t()
        h = a[:, :hidden] @ out.t()
        h = (h @ up.t()) @ down.t()


def reference(x, weight, bias, lens, pooling):
    """fp64 SPLADE vectors of these operands, in chunks of tokens."""
    rows = []
    for seq in x.split(lens.tolist()):
        acc = None
        for part in seq.split(GEMM_CHUNK):
            act = torch.log1p(torch.relu(
                part.double() @ weight.double().t() + bias.double()))
            red = act.amax(0) if pooling == "max" else act.sum(0)
            acc = red if acc is None else (torch.maximum(acc, red)
                                           if pooling == "max" else acc + red)
        rows.append(acc)
    return torch.stack(rows)


@torch.inference_mode()
def run(device: torch.device, module: Path, size: str, on_row=None) -> dict:
    """Every case's row; `on_row(rows)` after each, so that a run cut
    short still leaves what it measured."""
    math = load_math(module)
    timer = Timer(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator(device="cpu").manual_seed(0)
    vocabs, hidden, num_tokens, seq_lens, num_layers = SIZES[size]
    bf16 = torch.bfloat16
    layers = [[(torch.randn(*s, generator=gen) * 0.02).to(device, bf16)
               for s in ((3 * hidden, hidden), (hidden, hidden),
                         (4 * hidden, hidden), (hidden, 4 * hidden))]
              for _ in range(num_layers)]
    rows = []
    for name, vocab in vocabs.items():
        # Scaled so that logits spread like a trained head's (a few units).
        weight32 = (torch.randn(vocab, hidden, generator=gen) * 0.1).to(device)
        bias32 = (torch.randn(vocab, generator=gen) - 2).to(device)
        for seq_len in seq_lens:
            lens = torch.full((num_tokens // seq_len, ), seq_len)
            x32 = torch.randn(num_tokens, hidden, generator=gen).to(device)
            encoder_s = timer(partial(encoder_gemms, x32.to(bf16), layers))
            refs = {p: reference(x32, weight32, bias32, lens, p)
                    for p in ("max", "sum")}
            for dname, dtype in DTYPES.items():
                x, weight, bias = (t.to(dtype) for t in (x32, weight32, bias32))
                gemm_s = timer(partial(gemm, x, weight, bias))
                cols = math.block_columns(num_tokens, vocab, device)
                for pooling in ("max", "sum"):
                    ref = refs[pooling]
                    same = (ref if dtype == torch.float32 else
                            reference(x, weight, bias, lens, pooling))
                    for reduction in REDUCTIONS:
                        if reduction == "scatter" and device.type != "cpu":
                            continue
                        offsets = offsets_for(math, device, lens, reduction)
                        pool = partial(math.pool_vocab_blocks, x, weight, bias,
                                       lens, offsets, pooling, "relu", cols)
                        if device.type == "cuda":
                            torch.cuda.synchronize()
                            torch.cuda.reset_peak_memory_stats()
                            before = torch.cuda.memory_allocated()
                        pooled = no_sync(device, pool)
                        peak = (torch.cuda.max_memory_allocated() - before
                                if device.type == "cuda" else None)
                        pool_s = timer(pool)
                        err = (pooled.double() - ref).abs().max() / ref.max()
                        own = (pooled.double() - same).abs().max() / same.max()
                        rows.append(dict(
                            vocab=name, vocab_size=vocab, hidden=hidden,
                            tokens=num_tokens, seq_len=seq_len, dtype=dname,
                            pooling=pooling, reduction=reduction,
                            pooler_s=pool_s, gemm_s=gemm_s,
                            pooler_over_gemm=pool_s / gemm_s,
                            encoder_gemms_bf16_s=encoder_s,
                            pooler_over_encoder=pool_s / encoder_s,
                            peak_extra_bytes=peak,
                            logits_bytes=num_tokens * vocab * x.element_size(),
                            max_rel_err=err.item(),
                            max_rel_err_same_operands=own.item(),
                            terms_flipped=int(((pooled != 0) != (ref != 0)).sum()),
                        ))
                        del pooled
                        if on_row is not None:
                            on_row(rows)
                del x, weight, bias
    assert "vllm" not in sys.modules or sys.modules["vllm"] is None
    return {"device": (torch.cuda.get_device_name(device)
                       if device.type == "cuda" else "cpu"),
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "size": size, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--module", type=Path, default=MODULE)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", choices=SIZES, default="full")
    args = parser.parse_args()
    started = time.perf_counter()

    def save(rows):
        if args.out:
            Path(args.out).write_text(json.dumps({"rows": rows}, indent=1))

    result = run(torch.device(args.device), args.module, args.size, save)
    result["wall_s"] = time.perf_counter() - started
    for r in result["rows"]:
        print(f"{r['vocab']:6} {r['seq_len']:5}x{r['tokens'] // r['seq_len']:<3} "
              f"{r['dtype']:4} {r['pooling']:3} {r['reduction']:9} "
              f"pooler {r['pooler_s'] * 1e3:8.2f} ms  "
              f"GEMM {r['gemm_s'] * 1e3:8.2f} ms  "
              f"x{r['pooler_over_gemm']:5.2f}  "
              f"/encoder x{r['pooler_over_encoder']:5.2f}  "
              f"err {r['max_rel_err']:.1e} "
              f"(own {r['max_rel_err_same_operands']:.1e})  "
              f"flipped {r['terms_flipped']}")
    print(f"wall {result['wall_s']:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
