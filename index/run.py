# SPDX-License-Identifier: Apache-2.0
"""Encode a corpus into Parquet shards of SPLADE vectors on Ray Data over
vLLM engine actors (`make index`; docs/usage.md, docs/scaling.md). A re-run
skips the shards that are done and finishes the rest.

    python -m index.run [--input FILE...] [--out DIR] [--model FOLDER]
        [--actors N] [--shard-size N] [--address ADDR] ...
"""
import argparse
import collections
import fcntl
import hashlib
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from index.shards import Shard, commit, plan, record, sha256

ROOT = Path(__file__).resolve().parents[1]
# What the engine actors take from the driver's environment (a worker's
# own environment is its node's `ray start`'s): vLLM's settings and the
# hub's offline switches, not credentials (a runtime_env is visible in
# Ray's job information).
FORWARDED = ("HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_CACHE", "TRANSFORMERS_OFFLINE",
             "TOKENIZERS_PARALLELISM")


def log(msg: str) -> None:
    print(f"index: {msg}", file=sys.stderr, flush=True)


def debian_jsonl(path: Path) -> Path:
    """The eval's corpus, every Debian package description, as id + text
    (hybrid.corpus.doc_ids: the package name, `#2`... where repeated)."""
    if not path.is_file():
        from hybrid.corpus import doc_ids, read_packages

        packages = read_packages()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for id_, p in zip(doc_ids(packages), packages):
                f.write(json.dumps({"id": id_, "text": p.text}) + "\n")
        os.replace(tmp, path)
    return path


def model_files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): sha256(p)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m index.run",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--input", nargs="+", type=Path,
                    help="JSONL or Parquet files of `id` and `text` (default: "
                    "the eval's Debian corpus, build/index/debian.jsonl)")
    ap.add_argument("--out", type=Path, default=ROOT / "build/index/out")
    ap.add_argument("--model", type=Path,
                    default=ROOT / "build/models/splade-tiny-sparse-encoder")
    ap.add_argument("--shard-size", type=int, default=1000,
                    help="input rows per shard, the unit of work and of commit")
    ap.add_argument("--limit-shards", type=int, default=0,
                    help="only the first N shards (0: all)")
    ap.add_argument("--actors", type=int, default=1, help="vLLM engines")
    ap.add_argument("--cpus-per-actor", type=float, default=1)
    ap.add_argument("--gpus-per-actor", type=int, default=0,
                    help="GPUs an engine holds: its tensor parallel size, or 0")
    ap.add_argument("--tensor-parallel-size", type=int, default=1)
    ap.add_argument("--max-restarts", type=int, default=10,
                    help="times an actor is restarted after it dies (its process "
                    "or its node) before the job fails")
    ap.add_argument("--start-timeout", type=int, default=900,
                    help="seconds for every actor's engine to start")
    ap.add_argument("--dtype", default="auto", help="vLLM's --dtype")
    ap.add_argument("--hf-overrides", type=json.loads, default=None,
                    help="vLLM's --hf-overrides (JSON), for a folder that "
                    "needs them (a plain masked-LM folder)")
    ap.add_argument("--route", default="document",
                    help="the route an inference-free Router encodes with")
    ap.add_argument("--prompt-name", default=None,
                    help="the sentence-transformers prompt before each text "
                    "(default: `document`'s, where the folder has one)")
    ap.add_argument("--no-truncate", dest="truncate", action="store_false",
                    help="refuse (and list) texts longer than the model instead "
                    "of truncating them (TEI's `truncate`)")
    ap.add_argument("--address", default=None,
                    help="a Ray cluster's address (default: a local one)")
    ap.add_argument("--vllm-site", type=Path, default=None,
                    help="a site folder with the vLLM the actors import, first "
                    "on their PYTHONPATH, at this path on every node (make "
                    "index: stock vLLM's)")
    args = ap.parse_args(argv)
    if (args.limit_shards < 0 or args.max_restarts < 0 or args.actors < 1
            or args.start_timeout < 1):
        ap.error("--limit-shards and --max-restarts are 0 or more, --actors and "
                 "--start-timeout 1 or more")
    if args.gpus_per_actor not in (0, args.tensor_parallel_size):
        # vLLM sizes its memory for a whole GPU, so actors cannot share
        # one, and an engine uses as many GPUs as its tensor parallel size.
        ap.error(f"--gpus-per-actor {args.gpus_per_actor}: 0 (CPUs) or the "
                 f"--tensor-parallel-size ({args.tensor_parallel_size})")
    return args


def runtime_env(args) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k.startswith("VLLM_") or k in FORWARDED}
    if args.vllm_site:
        if not (args.vllm_site / "vllm").is_dir():
            raise SystemExit(f"index: {args.vllm_site} has no vllm package")
        env["PYTHONPATH"] = str(args.vllm_site.resolve())
    # The bar and the summary, not every engine's start-up log
    # (VLLM_LOGGING_LEVEL=INFO shows them).
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # The engine in the actor's own process: it dies with the actor.
    env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    if not args.gpus_per_actor:
        # vLLM's CPU backend binds an engine's threads to cores it picks
        # from the allowed ones, the same cores for every engine of a node:
        # two actors then share one core (measured: 49 documents/s each,
        # one alone 103). Unbound, the OS spreads the actors' threads
        # (Ray sets OMP_NUM_THREADS to an actor's CPUs).
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    # The index package travels to every node with the job.
    return {"env_vars": env, "py_modules": [str(ROOT / "index")]}


def encode(args, job: dict, pending: list[Shard]) -> list[dict]:
    """Map the pending shards over the engine actors; one summary per shard,
    in the order they finish, with a bar counted in input rows."""
    import ray
    from tqdm import tqdm

    ray.init(address=args.address, runtime_env=runtime_env(args))
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # ours counts rows
    # Every engine up before the first shard goes: shards spread over all
    # of them from the start, and a pool the cluster has no room for fails
    # here, saying so, instead of running on fewer engines.
    ctx.wait_for_min_actors_s = args.start_timeout
    from index.encoder import ShardEncoder

    ds = ray.data.from_items([asdict(s) for s in pending],
                             override_num_blocks=len(pending))
    ds = ds.map_batches(
        ShardEncoder,
        fn_constructor_kwargs={
            "model": str(args.model), "out": str(args.out), "job": job,
            "route": args.route, "truncate": args.truncate,
            "prompt_name": args.prompt_name,
            "llm_kwargs": {
                "dtype": args.dtype,
                "tensor_parallel_size": args.tensor_parallel_size,
                **({"hf_overrides": args.hf_overrides} if args.hf_overrides else {}),
            }},
        batch_size=1, concurrency=args.actors,
        num_cpus=args.cpus_per_actor, num_gpus=args.gpus_per_actor,
        # A dead actor (its process, or its node) is restarted, up to a
        # limit, and the shards it held are given again: each is rewritten
        # whole, under its own names. A shard that kills its actor every
        # time fails the job after the limit instead of looping.
        max_restarts=args.max_restarts, max_task_retries=args.max_restarts,
        scheduling_strategy="SPREAD")
    summaries = []
    rows = {s.shard: s.num_rows for s in pending}
    with tqdm(total=sum(rows.values()), unit="row", desc="index",
              mininterval=2, file=sys.stderr) as bar:
        for s in ds.iter_rows():
            summaries.append(s)
            bar.update(rows[s["shard"]])
            bar.set_postfix(shards=f"{len(summaries)}/{len(pending)}")
    return summaries


def report(summaries: list[dict], seconds: float) -> None:
    docs = sum(s["documents"] for s in summaries)
    log(f"{docs} documents encoded in {len(summaries)} shards, {seconds:.1f} s "
        f"({docs / seconds if seconds else 0:.1f} documents/s, engine start-up "
        "included)")
    by_actor = collections.defaultdict(list)
    for s in summaries:
        by_actor[s["actor"]].append(s)
    for actor, ss in sorted(by_actor.items()):
        d = sum(s["documents"] for s in ss)
        t = sum(s["seconds"] for s in ss)
        log(f"  actor {actor}: {len(ss)} shards, {d} documents, "
            f"{sum(s['tokens'] for s in ss)} tokens, {t:.1f} s encoding, "
            f"{d / t if t else 0:.1f} documents/s")


def job_of(args, files: list[Path], models: dict[str, str]) -> dict:
    """What a shard's vectors depend on besides its rows: a done shard of
    another job (model, settings or input changed) is encoded again."""
    digest = hashlib.sha256(json.dumps(models, sort_keys=True).encode()).hexdigest()
    return {"model_files": digest, "dtype": args.dtype, "route": args.route,
            "truncate": args.truncate, "hf_overrides": args.hf_overrides,
            "prompt_name": args.prompt_name,
            "inputs": {str(p.resolve()): [p.stat().st_size, p.stat().st_mtime_ns]
                       for p in files}}


def main(argv=None) -> dict:
    args = parse_args(argv)
    if not (args.model / "config.json").is_file():
        raise SystemExit(f"index: {args.model} has no config.json")
    files = args.input or [debian_jsonl(ROOT / "build/index/debian.jsonl")]
    for f in files:
        if not f.is_file():
            raise SystemExit(f"index: no input file {f}")
    args.out.mkdir(parents=True, exist_ok=True)
    # One run a folder: a second would take the first's shards as its own.
    lock = open(args.out / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"index: another run is writing {args.out}") from None
    for stale in args.out.glob(".shard-*.tmp"):  # from attempts that died
        stale.unlink()
    # Until every shard is done again, the folder has no finished index.
    for path in (args.out / "manifest.json", args.out / "refused.jsonl"):
        path.unlink(missing_ok=True)
    try:
        shards = plan(files, args.shard_size)
    except ValueError as e:
        raise SystemExit(f"index: {e}") from None
    if args.limit_shards:
        shards = shards[:args.limit_shards]
    if not shards:
        raise SystemExit(f"index: no rows in {', '.join(map(str, files))}")
    models = model_files(args.model)
    job = job_of(args, files, models)
    records = {s.shard: record(args.out, s, job) for s in shards}
    pending = [s for s in shards if records[s.shard] is None]
    log(f"{len(shards)} shards of {sum(s.num_rows for s in shards)} rows "
        f"({args.shard_size} a shard) to {args.out}: "
        f"{len(shards) - len(pending)} done, {len(pending)} to encode")
    start = time.perf_counter()
    if pending:
        report(encode(args, job, pending), time.perf_counter() - start)
        for s in pending:  # written this run: their sha256 is in the record
            records[s.shard] = record(args.out, s, job, verify=False)
    return write_manifest(args, files, shards, models, job, records)


def duplicates(out: Path, shards: list[Shard]) -> list[str]:
    """Ids that more than one input row has (each row is encoded)."""
    import pyarrow.parquet as pq

    seen: collections.Counter = collections.Counter()
    for s in shards:
        seen.update(pq.read_table(out / f"{s.name}.parquet", columns=["id"])["id"].to_pylist())
    return sorted(i for i, n in seen.items() if n > 1)


def write_manifest(args, files: list[Path], shards: list[Shard], models: dict,
                   job: dict, records: dict) -> dict:
    """manifest.json, once every shard is done: what each shard holds, the
    model, the versions; refused.jsonl, every row not encoded."""
    for s in shards:
        rec = records[s.shard]
        if rec is None:
            raise SystemExit(f"index: {s.name} is not done; run again")
        if rec["documents"] + len(rec["refused"]) != s.num_rows:
            raise SystemExit(f"index: {s.name} accounts for "
                             f"{rec['documents'] + len(rec['refused'])} of its "
                             f"{s.num_rows} rows")
    recs = [records[s.shard] for s in shards]
    refused = [{"shard": r["shard"]["shard"], **x} for r in recs for x in r["refused"]]
    commit(args.out / "refused.jsonl",
           lambda p: p.write_text("".join(json.dumps(x) + "\n" for x in refused)))
    twice = duplicates(args.out, shards)
    keys = ("vllm", "vllm_file", "vllm_splade", "max_model_len", "route", "prompt",
            "vocab_size")
    seen = {k: sorted({json.dumps(r[k]) for r in recs}) for k in keys}
    manifest = {
        "model": str(args.model.resolve()), "model_files": models,
        "dtype": args.dtype, "truncate": args.truncate, "job": job,
        # One value each where every shard agrees; a list where they differ
        # (a re-run with another build finished the job).
        **{k: json.loads(v[0]) if len(v) == 1 else [json.loads(x) for x in v]
           for k, v in seen.items()},
        "inputs": {str(p.resolve()): sha256(p) for p in files},
        "shard_size": args.shard_size, "limit_shards": args.limit_shards,
        "rows": sum(s.num_rows for s in shards),
        "documents": sum(r["documents"] for r in recs),
        "truncated": sum(len(r["truncated"]) for r in recs),
        "refused": dict(collections.Counter(x["why"].split(" (")[0] for x in refused)),
        "duplicate_ids": twice,
        "shards": [{"name": s.name, **asdict(s), "documents": r["documents"],
                    "seconds": r["seconds"], "actor": r["actor"],
                    "sha256": r["sha256"], "bytes": r["bytes"]}
                   for s, r in zip(shards, recs)],
    }
    commit(args.out / "manifest.json", lambda p: p.write_text(json.dumps(manifest, indent=1)))
    log(f"{manifest['documents']} of {manifest['rows']} rows encoded, "
        f"{manifest['truncated']} truncated to {manifest['max_model_len']} tokens, "
        f"{len(refused)} refused {manifest['refused']} (listed in "
        f"{args.out / 'refused.jsonl'}); {args.out / 'manifest.json'}")
    if twice:
        log(f"{len(twice)} ids are on more than one input row, each row encoded "
            f"(first: {twice[:5]}); the manifest's duplicate_ids lists them")
    return manifest


if __name__ == "__main__":
    main()
