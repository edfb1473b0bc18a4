# SPDX-License-Identifier: Apache-2.0
"""One rank of a tensor-parallel run that encodes texts with several models
in turn: `python -m torch.distributed.run --nproc-per-node N tp_encode.py
JOB OUT`. JOB is a JSON object: "texts", and "models", a list of {"model",
"task", "hf_overrides"}; rank 0 saves, per model, the SPLADE vectors ("embed") or the per-token masked-LM
distributions ("token_classify") to OUT.

vLLM's external launcher runs every engine of the list in the same N
processes, so the ranks import vLLM once: a TP server pays that per model.
The engines are kept until the end: the first one to shut down tears down
the process group, which the launcher's store cannot set up again."""
import json
import os
import sys

import torch


def main(job_file: str, out_file: str) -> None:
    from vllm import LLM

    with open(job_file) as f:
        job = json.load(f)
    texts, results, engines = job["texts"], {}, []
    for item in job["models"]:
        llm = LLM(model=item["model"], runner="pooling", dtype="float32",
                  enforce_eager=True, max_model_len=None,
                  hf_overrides=item.get("hf_overrides"),
                  tensor_parallel_size=int(os.environ["WORLD_SIZE"]),
                  distributed_executor_backend="external_launcher")
        if item["task"] == "embed":
            out = [o.outputs.embedding for o in llm.embed(texts, use_tqdm=False)]
            results[item["model"]] = torch.tensor(out)
        else:
            out = llm.encode(texts, pooling_task="token_classify", use_tqdm=False)
            results[item["model"]] = [o.outputs.data.float() for o in out]
        results[item["model"] + ":architecture"] = llm.model_config.architecture
        engines.append(llm)
    if int(os.environ["RANK"]) == 0:
        from importlib.metadata import version
        results["vllm"] = version("vllm")
        torch.save(results, out_file)


if __name__ == "__main__":
    main(*sys.argv[1:])
