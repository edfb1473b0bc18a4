# SPDX-License-Identifier: Apache-2.0
"""`make index` (index/) on a real Ray cluster on this machine: a head and
a second node, each `ray start`ed as a process of its own, two vLLM engine
actors (stock vLLM + the vllm-splade plugin, as `make index` runs them) on
splade-tiny's SparseEncoder folder in fp32. Every run must end with every
readable input id in the output once, the refused rows listed, and the
vectors of a single-process `LLM.encode`."""
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from hybrid import corpus, models
from index.encoder import Prepared
from index.rows import read_rows
from index.shards import Shard, commit, plan, record, sha256
from tests.index.cluster import ENV, Cluster

ROOT = Path(__file__).resolve().parents[2]
DOCS = 1000  # Debian descriptions; ~10 s of encoding on two engines here
SHARD = 50
MAX_LEN = 512
LONG = "lorem ipsum dolor sit amet " * 200  # ~1,000 tokens
# Rows the server would refuse (TEI's rules), and one it would truncate.
BAD = [
    (b'{"id": "empty", "text": ""}', "empty"),
    (b'{"id": "latin1", "text": "caf\xe9"}', "not UTF-8"),
    (b'{"id": "surrogate", "text": "\\ud800"}', "not UTF-8"),
    (b'{"id": "no-text"}', "`text` is not a string"),
    (b'{"text": "no id"}', "no `id`"),
    (b"not json", "not JSON"),
]


@pytest.fixture(scope="module")
def sparse_encoder() -> Path:
    return models.ensure_splade(ROOT / "build/models/splade-tiny",
                                ROOT / models.SPLADE)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> tuple[list[Path], list[str], dict[str, str]]:
    """A JSONL file of DOCS Debian descriptions, the bad rows and a long
    text among them, and a Parquet file of 100 more: (files, the ids the
    index must hold, their texts)."""
    d = tmp_path_factory.mktemp("corpus")
    packages = corpus.read_packages()
    ids = corpus.doc_ids(packages)
    good = [(i, p.text) for i, p in zip(ids, packages) if p.text][:DOCS + 100]
    lines = [json.dumps({"id": i, "text": t}).encode() for i, t in good[:DOCS]]
    for k, (raw, _) in enumerate(BAD):  # spread over the shards
        lines.insert(1 + k * 150, raw)
    lines.insert(500, json.dumps({"id": "long", "text": LONG}).encode())
    jsonl = d / "docs.jsonl"
    jsonl.write_bytes(b"\n".join(lines) + b"\n\n")  # a blank line is no row
    parquet = d / "more.parquet"
    pq.write_table(pa.table({"id": [i for i, _ in good[DOCS:]],
                             "text": [t for _, t in good[DOCS:]]}), parquet)
    texts = dict(good) | {"long": LONG}
    return [jsonl, parquet], [i for i, _ in good] + ["long"], texts


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("ray")).start()
    yield c
    c.stop()


def start_index(files, out: Path, model: Path, address: str | None,
                *args: str) -> subprocess.Popen:
    """`make index`'s command: stock vLLM's site first on the actors' path."""
    site = stock_env()["PYTHONPATH"].split(os.pathsep)[0]
    cmd = [sys.executable, "-m", "index.run", "--input", *map(str, files),
           "--out", str(out), "--model", str(model), "--shard-size", str(SHARD),
           "--dtype", "float32", "--vllm-site", site, *args]
    if address:
        cmd += ["--address", address]
    log = open(f"{out}.log", "w")
    return subprocess.Popen(cmd, cwd=ROOT, env={**ENV, "VLLM_PLUGINS": "vllm_splade"},
                            stdout=log, stderr=subprocess.STDOUT)


def finish(p: subprocess.Popen, out: Path, timeout: float = 420) -> str:
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = "timed out"
    log = Path(f"{out}.log").read_text(errors="replace")
    summary = "\n".join(line for line in log.splitlines() if line.startswith("index:"))
    print(summary)
    assert rc == 0, f"index.run: {rc}; see {out}.log\n{log[-3000:]}"
    return summary


def when_shards_done(out: Path, n: int, timeout: float = 300) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [json.loads(p.read_text()) for p in out.glob("shard-*.json")]
        if len(done) >= n:
            return done
        time.sleep(0.1)
    raise TimeoutError(f"{out}: {n} shards not done in {timeout} s")


def read_index(out: Path) -> dict[str, torch.Tensor]:
    manifest = json.loads((out / "manifest.json").read_text())
    vocab = manifest["vocab_size"]
    vectors, ids = {}, []
    for shard in manifest["shards"]:
        table = pq.read_table(out / f"{shard['name']}.parquet")
        assert int(table.schema.metadata[b"vocab_size"]) == vocab
        for id_, idx, val in zip(*(table[c].to_pylist() for c in ("id", "indices", "values"))):
            v = torch.zeros(vocab)
            v[torch.tensor(idx, dtype=torch.long)] = torch.tensor(val)
            vectors[id_] = v
            ids.append(id_)
    assert len(ids) == len(set(ids)), "an id twice"
    return vectors


def check_output(out: Path, inputs) -> dict[str, torch.Tensor]:
    """Every readable id once; the refused rows listed with the reason."""
    files, ids, _ = inputs
    vectors = read_index(out)
    assert sorted(vectors) == sorted(ids)
    refused = [json.loads(line) for line in (out / "refused.jsonl").read_text().splitlines()]
    assert sorted(r["why"].split(" (")[0] for r in refused) == sorted(w for _, w in BAD)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == len(ids) + len(BAD)
    assert manifest["documents"] == len(ids)
    assert manifest["truncated"] == 1
    assert manifest["max_model_len"] == MAX_LEN
    # Stock vLLM (the base build, not +splade) and the plugin did the work.
    assert "+base." in manifest["vllm"] and manifest["vllm_splade"]
    assert manifest["duplicate_ids"] == []
    return vectors


def stock_env() -> dict[str, str]:
    """Stock vLLM (the unpatched build of the pin) with the plugin's models."""
    site = os.environ.get("SPLADE_STOCK_SITE", str(ROOT / "build/vllm-base-site"))
    return {**ENV, "VLLM_PLUGINS": "vllm_splade",
            "PYTHONPATH": os.pathsep.join([site, str(ROOT)])}


@pytest.fixture(scope="module")
def reference(inputs, sparse_encoder, tmp_path_factory) -> dict[str, torch.Tensor]:
    """A single-process `LLM.encode` of every text, built as the actors
    build theirs (stock vLLM + the plugin, fp32, compiled), in a process of
    its own (a compiled engine must not share this lane's process); one
    call per shard, as the actors encode."""
    files, _, texts = inputs
    groups = [{r.id: texts[r.id] for r in read_rows(s) if r.why is None}
              for s in plan(files, SHARD)]
    d = tmp_path_factory.mktemp("reference")
    (d / "texts.json").write_text(json.dumps(groups))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests/index/encode_once.py"), str(sparse_encoder),
         str(d / "texts.json"), str(d / "vectors.pt")],
        # One thread, as Ray gives an actor of one CPU (OMP_NUM_THREADS=1).
        cwd=ROOT, env={**stock_env(), "OMP_NUM_THREADS": "1"}, capture_output=True,
        text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return torch.load(d / "vectors.pt")


def check_vectors(vectors, reference) -> None:
    diff = max((vectors[i] - reference[i]).abs().max().item() for i in reference)
    print(f"max abs diff from LLM.encode: {diff:.3g}")
    assert diff <= 1e-6


def test_rows_are_refused_or_truncated_as_the_server_does(tmp_path, sparse_encoder):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(sparse_encoder)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join([raw for raw, _ in BAD] + [
        b'{"id": 7, "text": " "}',
        json.dumps({"id": "long", "text": LONG}).encode()]) + b"\n")
    [shard] = plan([path], 100)
    rows = read_rows(shard)
    assert [r.row for r in rows] == list(range(len(BAD) + 2))
    p = Prepared(rows, tokenizer, MAX_LEN, truncate=True)
    assert [r["why"].split(" (")[0] for r in p.refused] == [w for _, w in BAD]
    # Whitespace is a text (/embed_sparse encodes it: [CLS] [SEP]); ids
    # are strings; the long text keeps its first tokens and its [SEP].
    assert p.ids == ["7", "long"] and p.truncated == ["long"]
    want = tokenizer(LONG, truncation=True, max_length=MAX_LEN)["input_ids"]
    assert p.token_ids[1] == want and len(want) == MAX_LEN
    assert want[-1] == tokenizer.sep_token_id
    # Without truncation the long text is refused, as TEI's 413 does.
    p = Prepared(rows, tokenizer, MAX_LEN, truncate=False)
    assert p.ids == ["7"]
    assert p.refused[-1]["why"].startswith("longer than the model (")
    # A folder's document prompt goes before the text, as encode_document.
    p = Prepared(rows[-2:-1], tokenizer, MAX_LEN, truncate=True, prompt="passage: ")
    assert p.token_ids == [tokenizer("passage:  ")["input_ids"]]


def test_a_done_shard_is_one_of_this_job(tmp_path):
    """A shard counts as done only for the job that wrote it: the same
    rows with another model, settings or input are encoded again."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n')
    [shard] = plan([path], 10)
    commit(tmp_path / f"{shard.name}.parquet", lambda p: p.write_bytes(b"vectors"))
    digest = sha256(tmp_path / f"{shard.name}.parquet")
    job = {"model_files": "m", "dtype": "float32"}
    (tmp_path / f"{shard.name}.json").write_text(
        json.dumps({"shard": asdict(shard), "job": job, "sha256": digest}))
    assert record(tmp_path, shard, job)["sha256"] == digest
    assert record(tmp_path, shard, {**job, "dtype": "float16"}) is None
    (tmp_path / f"{shard.name}.parquet").write_bytes(b"changed")
    assert record(tmp_path, shard, job) is None


def test_two_nodes_and_an_actor_killed_mid_job(cluster, inputs, sparse_encoder,
                                               reference, tmp_path):
    out = tmp_path / "index"
    p = start_index(inputs[0], out, sparse_encoder, cluster.address, "--actors", "2")
    shards = len(plan(inputs[0], SHARD))
    # The actor that committed the first shard dies (SIGKILL), mid-job.
    killed = when_shards_done(out, 1)[0]["actor"]
    os.kill(int(killed.rsplit(":", 1)[1]), signal.SIGKILL)
    assert len(list(out.glob("shard-*.json"))) < shards - 2, "the job ended first"
    summary = finish(p, out)
    vectors = check_output(out, inputs)
    check_vectors(vectors, reference)
    records = [json.loads(p.read_text()) for p in out.glob("shard-*.json")]
    # Both nodes encoded, and actors other than the killed one finished the
    # job. (Ray may run a shard the killed actor had finished again, when
    # its result had not reached the driver: the same files, same names.)
    actors = {r["actor"] for r in records}
    assert len({r["node"] for r in records}) == 2
    assert actors - {killed}, actors
    assert summary.count("documents/s") >= 2  # the run's line, and each actor's

    # A re-run skips every shard and starts no engine.
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*")}
    summary = finish(start_index(inputs[0], out, sparse_encoder, cluster.address), out)
    assert f"{shards} done, 0 to encode" in summary
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*")} == before

    # A shard whose file changed and one cut short (no manifest) are redone.
    with open(out / "shard-000003.parquet", "ab") as f:
        f.write(b"\0")
    (out / "shard-000007.json").unlink()
    summary = finish(start_index(inputs[0], out, sparse_encoder, cluster.address), out)
    assert f"{shards - 2} done, 2 to encode" in summary
    assert check_output(out, inputs).keys() == vectors.keys()


def test_a_node_stopped_mid_job(cluster, inputs, sparse_encoder, reference, tmp_path):
    out = tmp_path / "index"
    worker = cluster.node_id("node")
    p = start_index(inputs[0], out, sparse_encoder, cluster.address, "--actors", "2")
    # Once the second node has committed a shard, all of its processes go.
    deadline = time.monotonic() + 300
    while not (lost := [r for r in when_shards_done(out, 1) if r["node"] == worker]):
        assert time.monotonic() < deadline, "no shard from the second node"
        time.sleep(0.1)
    cluster.stop_node()
    assert len(list(out.glob("shard-*.json"))) < len(plan(inputs[0], SHARD)) - 2
    # A replacement node joins (as an autoscaler starts one): the lost
    # actor is restarted there, or its shards go to the head's.
    cluster.start_node()
    finish(p, out)
    vectors = check_output(out, inputs)
    check_vectors(vectors, reference)
    # The shards the node had committed are in the index; Ray may have
    # encoded them again elsewhere, to rebuild the results the node's
    # object store held (the same files, under the same names).
    manifest = json.loads((out / "manifest.json").read_text())
    names = {m["name"]: m for m in manifest["shards"]}
    for r in lost:
        assert names[Shard(**r["shard"]).name]["documents"] == r["documents"]


def test_an_inference_free_router_encodes_its_document_route(
        cluster, inputs, splade_tiny, tmp_path_factory):
    """OpenSearch's layout (the document model at the folder's root, a
    static query route): the index holds the document route's vectors,
    as sentence-transformers' `encode_document` makes them."""
    from sentence_transformers import SparseEncoder

    from tests.checkpoints import ensure_folder, save_opensearch_doc_of
    folder = ensure_folder(save_opensearch_doc_of, splade_tiny,
                           tmp_path_factory.mktemp("router") / "opensearch-doc")
    out = tmp_path_factory.mktemp("router-index") / "index"
    parquet = inputs[0][1]
    finish(start_index([parquet], out, folder, cluster.address), out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["route"] == "document" and manifest["refused"] == {}
    vectors = read_index(out)
    table = pq.read_table(parquet)
    ids, texts = table["id"].to_pylist(), table["text"].to_pylist()
    want = SparseEncoder(str(folder), device="cpu").encode_document(
        texts, convert_to_tensor=True, convert_to_sparse_tensor=False)
    got = torch.stack([vectors[i] for i in ids])
    assert torch.equal(got > 0, want > 0)
    assert (got - want).abs().max().item() < 1e-5
