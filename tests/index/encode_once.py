# SPDX-License-Identifier: Apache-2.0
"""The single-process reference of `make index`: one `LLM` as the index's
actors build it (same folder, fp32, vLLM's defaults: compiled), encoding
every text, the long ones truncated by vLLM's own tokenization:
`python encode_once.py MODEL TEXTS.json OUT.pt`. TEXTS.json is a list of
groups of {id: text}, one `LLM.encode` call each: the index's shards, so
that both make the same batches (vLLM's fp32 CPU kernels give results that
differ in the last bits from one batch shape to another)."""
import json
import sys

import torch


def main(model: str, texts_file: str, out_file: str) -> None:
    from vllm import LLM

    with open(texts_file) as f:
        groups = json.load(f)
    llm = LLM(model=model, runner="pooling", dtype="float32")
    max_len = llm.llm_engine.model_config.max_model_len
    vectors = {}
    for texts in groups:
        outs = llm.encode(list(texts.values()), use_tqdm=False, pooling_task="embed",
                          tokenization_kwargs={"truncation": True,
                                               "max_length": max_len})
        vectors |= {i: o.outputs.data.float().reshape(-1) for i, o in zip(texts, outs)}
    torch.save(vectors, out_file)


if __name__ == "__main__":
    main(*sys.argv[1:])
