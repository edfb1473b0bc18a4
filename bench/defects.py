# SPDX-License-Identifier: Apache-2.0
"""Upstream's SPLADE defects, measured: the unpatched build of the pin and
the patched one, each against sentence-transformers, on the 53 parity texts
(tests/models/language/pooling/splade_texts.py) and variants of splade-tiny.
These are the figures the series' commit messages quote.

Every variant is written in the form upstream can load (bench/models.py
`upstream_tensors`: decoder written out, head names fixed), so both builds
and sentence-transformers read the very same folder:
- as is: the control, where both builds should match;
- gelu_new: config `hidden_act` gelu_new (upstream's head uses exact GELU);
- cls/sep ids: config with `cls_token_id`/`sep_token_id` (upstream drops
  the first and last token then);
- sum, log1p_relu: a SparseEncoder folder with that SpladePooling
  (upstream always pools with max and log1p(relu));
- bf16: the model run in bfloat16, head included on both builds (the
  patched masked-LM head takes the model's dtype unless `head_dtype` is
  set); the reference stays fp32.

    python -m bench.defects OUT.json [--site DIR]
    python -m bench.defects child BUILD JOB.json      (internal)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from bench.e2e import st_vectors
from bench.models import BENCH, ROOT, SPLADE, TINY, upstream_tensors


def _write_folder(out: Path, config: dict, pooling: tuple | None) -> None:
    """splade-tiny, optionally as a SparseEncoder with `pooling`, in the
    form upstream loads, with `config` merged into its config.json."""
    from safetensors.torch import load_file, save_file
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if pooling is None:
        shutil.copytree(TINY, tmp)
    else:
        from sentence_transformers import SparseEncoder
        from sentence_transformers.sparse_encoder.modules import (
            SpladePooling, Transformer)
        strategy, activation = pooling
        SparseEncoder(modules=[
            Transformer(str(TINY), transformer_task="fill-mask"),
            SpladePooling(pooling_strategy=strategy,
                          activation_function=activation)
        ],
                      device="cpu").save(str(tmp))
    weights = tmp / "model.safetensors"
    save_file(upstream_tensors(load_file(weights)), weights,
              metadata={"format": "pt"})
    path = tmp / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | config,
                               indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def folders() -> dict[str, Path]:
    """Case name -> its folder, made on first use."""
    root = BENCH / "defects"
    specs = {
        "as is": ({}, None),
        "gelu_new": ({"hidden_act": "gelu_new"}, None),
        "cls/sep ids": ({"cls_token_id": 101, "sep_token_id": 102}, None),
        "sum": ({}, ("sum", "relu")),
        "log1p_relu": ({}, ("max", "log1p_relu")),
    }
    out = {}
    for name, (config, pooling) in specs.items():
        path = root / name.replace("/", "-").replace(" ", "-")
        if not (path / "model.safetensors").is_file():
            _write_folder(path, config, pooling)
        out[name] = path
    out["bf16"] = out["as is"]
    return out


@torch.inference_mode()
def child(build: str, job_path: str) -> None:
    """Every case with this process's vLLM build, one engine at a time."""
    import gc
    from importlib.metadata import version

    from vllm import LLM
    found = version("vllm")
    if f"+{build}." not in found:
        raise SystemExit(f"bench: defects wants a +{build} build of vLLM, "
                         f"found {found}")
    job = json.loads(Path(job_path).read_text())
    vectors = {}
    for name, path in job["folders"].items():
        llm = LLM(model=path,
                  runner="pooling",
                  dtype="bfloat16" if name == "bf16" else "float32",
                  enforce_eager=True,
                  max_model_len=512,
                  hf_overrides=SPLADE)
        out = llm.embed(job["texts"], use_tqdm=False)
        vectors[name] = torch.tensor([o.outputs.embedding for o in out])
        del llm, out
        gc.collect()
    torch.save({"vllm": found, "vectors": vectors}, job["out"])


def compare(got: torch.Tensor, want: torch.Tensor) -> dict:
    flipped = (got > 0) != (want > 0)
    return {
        "max_abs_diff": (got - want).abs().max().item(),
        "texts_off": int(((got - want).abs() > 1e-5).any(1).sum()),
        "texts_other_terms": int(flipped.any(1).sum()),
        "terms_flipped": int(flipped.sum()),
        "terms": int((want > 0).sum()),
        "min_cosine": torch.nn.functional.cosine_similarity(got, want)
        .min().item(),
    }


def main(out_path: str, site: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.models.language.pooling.splade_texts import PARITY_TEXTS
    if not (site / "vllm").is_dir():
        raise SystemExit(f"bench: no unpatched vLLM build in {site}")
    paths = folders()
    results = {"texts": len(PARITY_TEXTS), "cases": {}}
    got = {}
    for build, key in (("patched", "splade"), ("upstream", "base")):
        job = BENCH / f"defects-{build}.json"
        out = BENCH / f"defects-{build}.pt"
        job.write_text(json.dumps({
            "folders": {n: str(p) for n, p in paths.items()},
            "texts": PARITY_TEXTS, "out": str(out)}))
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if build == "upstream":
            env["PYTHONPATH"] = str(site)
        subprocess.run([sys.executable, "-m", "bench.defects", "child", key,
                        str(job)], check=True, cwd=ROOT, env=env)
        got[build] = torch.load(out)
        results[build + "_vllm"] = got[build]["vllm"]
    for name, path in paths.items():
        want = st_vectors(path, PARITY_TEXTS)
        row = results["cases"][name] = {}
        for build in ("patched", "upstream"):
            row[build] = compare(got[build]["vectors"][name], want)
            r = row[build]
            print(f"bench: defects {name:12} {build:8} vs ST: max |diff| "
                  f"{r['max_abs_diff']:.3g}, {r['texts_off']} texts off "
                  f"(> 1e-5), {r['texts_other_terms']} with other terms, "
                  f"{r['terms_flipped']} of {r['terms']} terms flipped, "
                  f"min cosine {r['min_cosine']:.5f}", flush=True)
    Path(out_path).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], sys.argv[3])
        sys.exit()
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--site", type=Path,
                        default=ROOT / "build/vllm-base-site")
    args = parser.parse_args()
    main(args.out, args.site)
