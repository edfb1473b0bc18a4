# SPDX-License-Identifier: Apache-2.0
"""Known-item metrics: one relevant document per query."""
import math

import numpy as np


def rank_of(ranking: list[int], relevant: int) -> int:
    """1-based rank of `relevant` in `ranking`, 0 if absent."""
    try:
        return ranking.index(relevant) + 1
    except ValueError:
        return 0


def scores(rankings: list[list[int]], relevant: list[int]) -> dict:
    """MRR@10, nDCG@10 (one relevant document: 1/log2(rank + 1)) and
    Recall@100, averaged over the queries."""
    ranks = [rank_of(r[:100], d) for r, d in zip(rankings, relevant)]
    return {
        "mrr@10": float(np.mean([1 / r if 0 < r <= 10 else 0 for r in ranks])),
        "ndcg@10": float(np.mean(
            [1 / math.log2(r + 1) if 0 < r <= 10 else 0 for r in ranks])),
        "recall@100": float(np.mean([r > 0 for r in ranks])),
    }


def percentiles(seconds: list[float]) -> dict:
    ms = np.array(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99))}
