# SPDX-License-Identifier: Apache-2.0
"""The pooling step alone: SpladeSparsePooler vs a naive loop vs the GEMM.

64 requests of equal length (4096 and 16384 tokens in all, in one call;
and 4096 in 8 calls of 512 tokens, the steps in which vLLM's CPU scheduler
feeds the pooler) through `SpladeSparsePooler` (embed, max) on a
`BertMLMHead` with vocab 30522 and hidden 128 and 768; a naive per-request
loop (head, log1p(relu), amax); and the bare decoder GEMM on the same
tokens in 512-token chunks (the floor). One warm-up per method and hidden
size, then the best of 3 rounds, the methods
interleaved in each round so that a burst of load hits them alike;
wall time, and process CPU time (steadier when other jobs share the
cores).

    python -m bench.pooler OUT.json
"""
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Callable

import torch
from transformers import BertConfig
from vllm.model_executor.models.bert import BertMLMHead, SpladeSparsePooler
from vllm.pooling_params import PoolingParams
from vllm.v1.pool.metadata import PoolingMetadata

VOCAB = 30522
NUM_REQUESTS = 64
# (tokens in all, tokens per pooler call): one call for the whole batch,
# and the 512-token steps in which vLLM's CPU scheduler feeds the pooler.
CASES = ((4096, 4096), (16384, 16384), (4096, 512))
HIDDEN = (128, 768)


def make_head(hidden: int) -> BertMLMHead:
    """A seeded random masked-LM head of the given width."""
    torch.manual_seed(0)
    config = BertConfig(hidden_size=hidden, vocab_size=VOCAB)
    head = BertMLMHead(config).eval()
    torch.nn.init.normal_(head.decoder.weight, std=0.02)
    torch.nn.init.normal_(head.bias, std=0.02)
    return head


def make_metadata(lens: list[int]) -> PoolingMetadata:
    """As tests/models/language/pooling/test_splade.py `_metadata`."""
    meta = PoolingMetadata(
        prompt_lens=torch.tensor(lens),
        prompt_token_ids=None,
        pooling_params=[PoolingParams(task="embed") for _ in lens],
    )
    meta.build_pooling_cursor(lens, torch.device("cpu"))
    return meta


def naive(head: BertMLMHead, hidden: torch.Tensor,
          lens: list[int]) -> torch.Tensor:
    """Per request: the head's logits, log1p(relu), max over tokens."""
    return torch.stack([
        torch.log1p(torch.relu(head(seq))).amax(0)
        for seq in hidden.split(lens)
    ])


def gemm(head: BertMLMHead, hidden: torch.Tensor, chunk: int = 512) -> None:
    """The bare decoder GEMM with bias on all tokens, `chunk` rows a time."""
    weight = head.decoder.weight
    buf = hidden.new_empty((chunk, weight.shape[0]))
    for first in range(0, hidden.shape[0], chunk):
        part = hidden[first:first + chunk]
        torch.addmm(head.bias, part, weight.t(), out=buf[:part.shape[0]])


def best_of(methods: dict[str, Callable[[], object]],
            repeat: int = 3) -> dict[str, float]:
    """Best wall and CPU time of each method over `repeat` interleaved
    rounds."""
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, fn in methods.items():
            start, cpu = time.perf_counter(), time.process_time()
            fn()
            for key, value in ((name + "_s", time.perf_counter() - start),
                               (name + "_cpu_s", time.process_time() - cpu)):
                best[key] = min(best.get(key, value), value)
    return best


def in_calls(fn: Callable[..., torch.Tensor], calls: list[tuple]) -> None:
    """Run `fn` on each call's arguments, as vLLM runs a pooler per step."""
    for args in calls:
        fn(*args)


@torch.inference_mode()
def main(out_path: str) -> None:
    rows = []
    for hidden_size in HIDDEN:
        head = make_head(hidden_size)
        pooler = SpladeSparsePooler(head, "embed")
        warm = True
        for num_tokens, per_call in CASES:
            seq_len = num_tokens // NUM_REQUESTS
            lens = [seq_len] * (per_call // seq_len)
            meta = make_metadata(lens)
            hidden = torch.randn(num_tokens, hidden_size)
            steps = hidden.split(per_call)
            methods = {
                "ours": partial(in_calls, pooler, [(h, meta) for h in steps]),
                "naive": partial(in_calls, partial(naive, head),
                                 [(h, lens) for h in steps]),
                "gemm": partial(gemm, head, hidden),
            }
            if warm:  # once per method and hidden size
                torch.testing.assert_close(pooler(steps[0], meta),
                                           naive(head, steps[0], lens),
                                           rtol=1e-4,
                                           atol=1e-4)
                for fn in methods.values():
                    fn()
                warm = False
            row = dict(hidden=hidden_size, tokens=num_tokens, per_call=per_call)
            row.update(best_of(methods))
            print(f"bench: pooler hidden {hidden_size}, {num_tokens} tokens "
                  f"in calls of {per_call}: " +
                  ", ".join(f"{m} {row[m + '_s']:.3f} s" for m in methods),
                  flush=True)
            rows.append(row)
    Path(out_path).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
