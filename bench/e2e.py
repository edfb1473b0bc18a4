# SPDX-License-Identifier: Apache-2.0
"""End to end: texts/s of the patched vLLM SPLADE vs upstream's unpatched
SPLADE of the same pin vs sentence-transformers, and the floor.

For one checkpoint, on the same texts, side by side in one run:
- patched: `LLM.embed` with BertSpladeSparseEmbeddingModel in .venv's
  patched vLLM build, on the checkpoint as it is;
- upstream: the same in the unpatched build of the same pin (tag `base`,
  installed under build/vllm-base-site, --site), on the copy of the
  checkpoint that upstream can load (bench/models.py `ensure_upstream`);
- stock + plugin: that unpatched build with the vllm-splade plugin
  (VLLM_PLUGINS=vllm_splade), on the checkpoint as it is, on the README's
  path: what a user of the official wheel runs;
- sentence-transformers: `SparseEncoder.encode(batch_size=32)`;
- the floor: vLLM's dense BertModel embedding of the same backbone
  (patched build) plus the bare decoder GEMM on the same number of tokens.
Each vLLM run is a subprocess of its own, with PYTHONPATH naming its
build's site (none for .venv's); sentence-transformers and the GEMM run in
this process, which imports no vLLM. Engine and model start are excluded;
each side gets one warm-up call. Each figure is wall time, with the CPU
time of the measuring process beside it (steadier when other jobs share
the cores); for the vLLM runs the wall time spent in the BERT encoder and
in the SPLADE pooler is recorded too (wrapped `forward`s).
With --rounds N the five run N times, interleaved, and the best is kept.

Before timing, the first --check texts are checked: upstream's vectors (on
its converted copy) must match the patched build's (on the original)
within 1e-5, or the run stops; sentence-transformers' difference is
printed too.

    python -m bench.e2e {tiny|base} OUT.json [--texts N] [--rounds N]
    python -m bench.e2e child JOB.json      (one vLLM run; internal)
"""
import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from functools import partial, wraps
from pathlib import Path

import torch

from bench.models import (BENCH, DENSE, ROOT, SPLADE, TINY, ensure_backbone,
                          ensure_base, ensure_upstream)

UPSTREAM_SITE = ROOT / "build/vllm-base-site"
CHECK_TOL = 1e-5

SPENT: dict[str, float] = {}


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _timed(cls: type, key: str) -> None:
    """Add the wall time of each `cls.forward` call to SPENT[key + "_s"],
    and the page faults it takes (fresh memory) to SPENT[key + "_faults"]."""
    forward = cls.forward

    @wraps(forward)
    def timed_forward(self, *args, **kwargs):
        start, faults = time.perf_counter(), _faults()
        try:
            return forward(self, *args, **kwargs)
        finally:
            seconds = time.perf_counter() - start
            SPENT[key + "_s"] = SPENT.get(key + "_s", 0.0) + seconds
            SPENT[key + "_faults"] = (SPENT.get(key + "_faults", 0) +
                                      _faults() - faults)

    cls.forward = timed_forward


def child(job_path: str) -> None:
    """One vLLM run, in a process of its own: JOB.json names the model,
    overrides, texts, the build it expects and where to write results."""
    job = json.loads(Path(job_path).read_text())
    from importlib.metadata import version

    import vllm
    from vllm import LLM
    from vllm.model_executor.models import bert
    if job["plugin"]:  # the plugin's copy of the series' module
        from vllm_splade.models import splade
    else:  # the series keeps SPLADE in its own module; upstream in bert.py
        try:
            from vllm.model_executor.models import splade
        except ImportError:
            splade = bert
    build = version("vllm")
    print(f"bench: {job['name']}: vllm {build} from "
          f"{Path(vllm.__file__).parent}", file=sys.stderr, flush=True)
    if f"+{job['build']}." not in build:
        raise SystemExit(f"bench: {job['name']} wants a +{job['build']} "
                         f"build of vLLM, found {build}")
    # The encoder is BertModel, compiled: time the model that calls it
    # (its forward is BertModel's and nothing else; dynamo cannot trace
    # a timer inside the compiled one).
    _timed(bert.BertEmbeddingModel, "encoder")
    _timed(splade.SPLADESparsePooler, "pooler")
    texts = json.loads(Path(job["texts"]).read_text())
    # As the README runs it: compiled (vLLM's default), fp32 unless the job
    # asks for bf16.
    llm = LLM(model=job["model"],
              runner="pooling",
              dtype=job.get("dtype", "float32"),
              max_model_len=512,
              hf_overrides=job["overrides"])
    warm = llm.embed(texts[:16], use_tqdm=False)
    llm.encode(texts[:16], pooling_task="embed", use_tqdm=False)
    if job.get("dump"):
        torch.save(
            torch.stack([
                torch.as_tensor(o.outputs.embedding, dtype=torch.float32)
                for o in warm[:job["check"]]
            ]), job["dump"])
    name, result = job["name"], {job["name"] + "_vllm": build}
    paths = {"list": "", "data": "_rec"}  # the key suffix of each path
    for path in job["paths"]:
        key = name + paths[path]
        SPENT.clear()
        gc.collect()
        start, cpu = time.perf_counter(), time.process_time()
        if path == "list":  # LLM.embed: a list of floats per text
            out = llm.embed(texts, use_tqdm=False)
        else:  # the README's path: encode, the pooled tensor as it is
            out = llm.encode(texts, pooling_task="embed", use_tqdm=False)
        embedded = time.perf_counter()
        # What a search-engine client needs: each vector's non-zero terms.
        if not job["terms"]:
            terms = out
        elif path == "list":
            terms = [_scan(o.outputs.embedding) for o in out]
        else:
            terms = [_terms(o.outputs.data) for o in out]
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        assert len(out) == len(terms) == len(texts)
        result |= {f"{key}_{k}": v for k, v in SPENT.items()}
        result |= {key + "_s": seconds, key + "_cpu_s": cpu,
                   key + "_accessor_s": seconds - (embedded - start)}
    Path(job["out"]).write_text(json.dumps(result))


def _terms(data: torch.Tensor) -> tuple[list[int], list[float]]:
    """The non-zero terms of a pooled tensor, as the README reads them."""
    indices = torch.nonzero(data).squeeze(1)
    return indices.tolist(), data[indices].tolist()


def _scan(embedding: list[float]) -> tuple[list[int], list[float]]:
    """The non-zero terms of a dense vector, as a client finds them."""
    dense = torch.tensor(embedding)
    indices = torch.nonzero(dense).squeeze(1)
    return indices.tolist(), dense[indices].tolist()


def vllm_run(name: str, build: str, site: Path | None, model: Path,
             overrides: dict, texts_path: Path, paths: tuple[str, ...],
             terms: bool = True, dtype: str = "float32",
             dump: Path | None = None, check: int = 0,
             plugin: bool = False) -> dict:
    """One vLLM run in a subprocess with `site` first on its path (and the
    vllm-splade plugin on with `plugin`)."""
    job_path = BENCH / f"e2e-job-{name}.json"
    out = BENCH / f"e2e-job-{name}.out.json"
    out.unlink(missing_ok=True)
    job_path.write_text(json.dumps({
        "name": name, "build": build, "model": str(model),
        "overrides": overrides, "texts": str(texts_path), "out": str(out),
        "dump": str(dump) if dump else None, "check": check,
        "paths": paths, "terms": terms, "dtype": dtype, "plugin": plugin,
    }))
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["VLLM_PLUGINS"] = "vllm_splade" if plugin else ""
    if site is not None:
        env["PYTHONPATH"] = str(site)
    subprocess.run([sys.executable, "-m", "bench.e2e", "child",
                    str(job_path)], check=True, cwd=ROOT, env=env)
    return json.loads(out.read_text())


def st_seconds(path: Path, texts: list[str]) -> dict[str, float]:
    """Wall time of sentence-transformers' SparseEncoder over `texts`."""
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(str(path), device="cpu")
    encoder.encode(texts[:32], batch_size=32)
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    out = encoder.encode(texts, batch_size=32)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(out) == len(texts)
    return {"st_s": seconds, "st_cpu_s": cpu}


def st_vectors(path: Path, texts: list[str],
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(str(path), device="cpu").to(dtype)
    return encoder.encode(texts, batch_size=32, convert_to_tensor=True,
                          convert_to_sparse_tensor=False).float()


@torch.inference_mode()
def gemm_seconds(hidden: int,
                 vocab: int,
                 num_tokens: int,
                 chunk: int = 512) -> dict[str, float]:
    """The bare decoder GEMM, [T, H] x [H, V] + bias, `chunk` rows a time."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(vocab, hidden, generator=gen) * 0.02
    bias = torch.zeros(vocab)
    x = torch.randn(chunk, hidden, generator=gen)
    buf = torch.empty(chunk, vocab)
    torch.addmm(bias, x, weight.t(), out=buf)  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for first in range(0, num_tokens, chunk):
        n = min(chunk, num_tokens - first)
        torch.addmm(bias, x[:n], weight.t(), out=buf[:n])
    return {
        "gemm_s": time.perf_counter() - start,
        "gemm_cpu_s": time.process_time() - cpu
    }


def main(which: str, out_path: str, num_texts: int, rounds: int,
         check: int, site: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from bench.corpus import count_tokens, make_corpus, subset
    path = TINY if which == "tiny" else ensure_base()
    backbone = ensure_backbone(path)
    upstream = ensure_upstream(path)
    if not (site / "vllm").is_dir():
        raise SystemExit(f"bench: no unpatched vLLM build in {site}")
    tokenizer = AutoTokenizer.from_pretrained(path)
    corpus = make_corpus(tokenizer)
    texts = subset(corpus, num_texts)
    check = min(check, 16, len(texts))
    lens = count_tokens(tokenizer, texts)
    config = AutoConfig.from_pretrained(path)
    BENCH.mkdir(parents=True, exist_ok=True)
    texts_path = BENCH / f"e2e-{which}-texts.json"
    texts_path.write_text(json.dumps(texts))
    result = {
        "model": path.name,
        "layers": config.num_hidden_layers,
        "hidden": config.hidden_size,
        "texts": len(texts),
        "corpus": len(corpus),
        "rounds": rounds,
        "tokens": sum(lens),
        "min_len": min(lens),
        "max_len": max(lens),
        "upstream_model": str(upstream.relative_to(ROOT)),
    }
    # The runs whose vectors are checked, by their key in `runs`.
    dumps = {key: BENCH / f"e2e-{which}-{key[:-2]}.pt"
             for key in ("patched_s", "upstream_s", "plugin_rec_s")}
    runs = {
        "patched_s": partial(vllm_run, "patched", "splade", None, path,
                             SPLADE, texts_path, ("list", "data")),
        "upstream_s": partial(vllm_run, "upstream", "base", site, upstream,
                              SPLADE, texts_path, ("list", "data")),
        "plugin_rec_s": partial(vllm_run, "plugin", "base", site, path,
                                SPLADE, texts_path, ("data", ),
                                plugin=True),
        "patched_bf16_rec_s": partial(vllm_run, "patched_bf16", "splade",
                                      None, path, SPLADE, texts_path,
                                      ("data", ), dtype="bfloat16"),
        "patched_bf16h32_rec_s": partial(vllm_run, "patched_bf16h32",
                                         "splade", None, path,
                                         SPLADE | {"head_dtype": "float32"},
                                         texts_path, ("data", ),
                                         dtype="bfloat16"),
        "dense_s": partial(vllm_run, "dense", "splade", None, backbone,
                           DENSE, texts_path, ("list", ), terms=False),
        "gemm_s": partial(gemm_seconds, config.hidden_size,
                          config.vocab_size, sum(lens)),
        "st_s": partial(st_seconds, path, texts),
    }
    for key, dump in dumps.items():  # the first round also checks
        runs[key] = partial(runs[key], dump=dump, check=check)
    for round_ in range(rounds):  # interleaved; the best of each is kept
        for key, run in runs.items():
            figures = run()
            if figures[key] < result.get(key, float("inf")):
                result.update(figures)
            for k in (key, key.replace("_s", "_rec_s")):
                if k in figures:
                    print(f"bench: {path.name} {k[:-2]} {figures[k]:.2f} s "
                          f"(CPU {figures[k[:-2] + '_cpu_s']:.2f} s)",
                          flush=True)
            if round_ == 0 and key == "plugin_rec_s":
                result.update(check_vectors(dumps, path, texts[:check]))
                for key in dumps:  # once is enough
                    runs[key] = partial(runs[key], dump=None, check=0)
    Path(out_path).write_text(json.dumps(result, indent=1))


def check_vectors(dumps: dict[str, Path], path: Path,
                  texts: list[str]) -> dict:
    """Upstream (converted copy) and stock + plugin vs patched (original)
    on the same texts: stop unless they match within CHECK_TOL; ST's
    difference for scale."""
    patched = torch.load(dumps["patched_s"])
    st = st_vectors(path, texts)
    result = {"check_texts": len(texts),
              "check_st_diff": (st - patched).abs().max().item()}
    for side, key in (("upstream", "upstream_s"), ("plugin", "plugin_rec_s")):
        other = torch.load(dumps[key])
        diff = (other - patched).abs().max().item()
        same_terms = ((other > 0) == (patched > 0)).all(1).sum().item()
        verdict = "ok" if diff <= CHECK_TOL else "MISMATCH"
        print(f"bench: check {path.name}: {side} vs patched, first "
              f"{len(texts)} texts: max |diff| {diff:.2e} (<= "
              f"{CHECK_TOL:.0e}: {verdict}), same non-zero terms in "
              f"{same_terms}/{len(texts)}", flush=True)
        if diff > CHECK_TOL:
            raise SystemExit(f"bench: {side} and patched SPLADE differ by "
                             f"{diff:.2e} on {path.name}: not the same model")
        result |= {f"check_{side}_diff": diff,
                   f"check_{side}_same_terms": same_terms}
    print(f"bench: check {path.name}: sentence-transformers vs patched: "
          f"{result['check_st_diff']:.2e}", flush=True)
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2])
        sys.exit()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", choices=("tiny", "base"))
    parser.add_argument("out")
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--check", type=int, default=16,
                        help="texts checked upstream vs patched (<= 16)")
    parser.add_argument("--site", type=Path, default=UPSTREAM_SITE,
                        help="site dir of the unpatched vLLM build")
    args = parser.parse_args()
    main(args.model, args.out, args.texts, args.rounds, args.check,
         args.site)
