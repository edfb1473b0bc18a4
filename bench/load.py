# SPDX-License-Identifier: Apache-2.0
"""Load and responsiveness: many concurrent clients mixing good, bad, large
and abandoned requests against the served splade-tiny for a bounded time.

The patched server (.venv's CPU build, `vllm serve` on loopback through
tests.utils.SpladeServer, --hf-overrides BertSpladeSparseEmbeddingModel,
access log off) gets --clients asyncio + aiohttp clients for --seconds.
Each client, on a keep-alive connection of its own, draws one request
after another at random (seeded) from these kinds:
- small: /embed_sparse of one query, or /v1/embeddings of one query (the
  full 30,522-float vector);
- large: /embed_sparse of 32 passages (the most the server is to take in
  one request), or of one passage repeated to a ~1.5 MB body with
  `"truncate": true`;
- bad: malformed JSON, a wrong content type, `{"inputs": []}`,
  `{"inputs": ""}`, a token id out of the vocabulary, `top_k: -1`, a text over the model's
  512 tokens with `"truncate": false`; any 4xx is the expected answer;
- over-limit: 33-40 inputs (422 expected, TEI 1.9's) or a body over 2,000,000
  bytes (413 expected); a build that does not enforce these limits answers 200,
  counted as `over_limit_accepted` (and its answer checked), not a failure;
- disconnect: a large request whose connection is closed 20-100 ms after it
  is sent.
Every good request's answer is checked, after the run (so that checking
does not take CPU from the server during it), against sentence-transformers'
SparseEncoder on the same checkpoint (bench/e2e.py `st_vectors`) for exactly
the texts that request sent, in order: as many vectors as inputs, the same
non-zero terms except terms below 1e-4 on either side, max |diff| <= 1e-4.
Texts come from a pool of 300 distinct corpus texts (bench/corpus.py), so
an answer sent to the wrong request shows up as a wrong answer.

A separate process GETs /health every 50 ms for the whole run (its own
connection, its own interpreter: the clients' event loop cannot delay it).
The clients start no request after --seconds; the run ends when the last
one in flight is answered (the window, over which requests/s is counted).
Figures: requests and status classes (2xx, 4xx, 5xx, connection errors,
timeouts after 120 s, deliberate disconnects) per kind and per request
case, with each case's p50/max wall time; wrong answers (up to 5
examples, each naming the reference nearest to the wrong vector: another
request's text means a misrouted answer) and the largest |diff| seen;
lost answers (a timeout, or a connection error that was not a deliberate
disconnect); p50/p99/max wall time of small requests and of /health, with
the slowest /health probes and what was in flight then; requests/s; CPU
seconds of each process (server, engine, clients, prober) in the window;
and after the load: server alive, /health 200, one good request equal to
the reference, and the engine's counters (/metrics) of finished sequences,
which less the texts answered gives the work spent on dropped requests.
Wall times are the clients' (on loopback, request sent to answer read).
The issue's targets (/health p99 < 100 ms; no wrong or lost answers, no
5xx) are reported, not asserted: the exit status is non-zero only when the
benchmark itself breaks.

    python -m bench.load OUT.json [--seconds N] [--clients N] [--seed N]
                                  [--bulk-priority N]

--bulk-priority N serves with --scheduling-policy priority and sends the
large requests at priority N, as a deployment that indexes in bulk while
it answers queries would.
    python -m bench.load probe URL OUT.json      (the /health prober; internal)
"""
import argparse
import asyncio
import gc
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from bench.models import ROOT, TINY
from tests.utils import SPLADE_OVERRIDES, SpladeServer

POOL = 300  # distinct texts, queries and passages
MAX_INPUTS = 32  # inputs per request the server is to take
MAX_BODY = 2_000_000  # bytes per request body the server is to take
LONG_BODY = 1_500_000  # bytes of a `truncate` request's text
TOL = 1e-4
VOCAB = 30522
TIMEOUT = 120.0  # s without an answer: lost
PROBE_EVERY = 0.05  # s between /health probes
CUT = (0.02, 0.1)  # s after which a disconnect client drops its request
HEALTH_TARGET_MS = 100.0  # /health p99, reported not asserted
KINDS = ("small", "large", "bad", "over-limit", "disconnect")
EXAMPLES = 5


@dataclass
class Request:
    """One HTTP request and what its answer must be."""
    case: str
    kind: str
    path: str
    data: bytes
    content_type: str = "application/json"
    refs: Optional[list[str]] = None  # reference texts of a good answer
    openai: bool = False  # /v1/embeddings' answer, not /embed_sparse's
    cut: Optional[float] = None  # s after which the client disconnects
    summary: str = ""


@dataclass
class Record:
    """What one request got."""
    request: Request
    t0: float
    t1: float
    status: Optional[int] = None
    error: Optional[str] = None  # "timeout", "conn: ...", "cut"
    body: bytes = b""
    wrong: Optional[str] = None
    extra: dict = field(default_factory=dict)

    @property
    def ms(self) -> float:
        return 1000 * (self.t1 - self.t0)


# --- the texts and their reference vectors ---------------------------------


def repeat_to(text: str, size: int) -> str:
    """`text` repeated, joined with spaces, to at least `size` characters."""
    return " ".join([text] * (size // (len(text) + 1) + 1))


def make_texts(seed: int) -> dict:
    """The pool (queries apart from passages), the long texts, and for each
    long text the prefix that has the same first 510 tokens (its reference
    under right truncation, cheap to encode)."""
    from transformers import AutoTokenizer

    from bench.corpus import count_tokens, make_corpus
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    pool = list(dict.fromkeys(make_corpus(tokenizer, POOL, seed=seed)))
    lens = count_tokens(tokenizer, pool)
    queries = [t for t, n in zip(pool, lens) if n <= 18]
    passages = [t for t, n in zip(pool, lens) if n > 18]
    longest = sorted(passages, key=len)[-4:]
    prefixes = {}  # long text -> its reference text
    for size in (LONG_BODY, MAX_BODY + 100_000):
        for text in longest:
            n = len(tokenizer(text)["input_ids"]) - 2
            prefix = " ".join([text] * (600 // n + 1))
            prefixes[repeat_to(text, size)] = prefix
    too_long = repeat_to(passages[0], 0)
    while len(tokenizer(too_long)["input_ids"]) <= 600:
        too_long += " " + passages[0]
    return {"queries": queries, "passages": passages, "prefixes": prefixes,
            "too_long": too_long}


def reference(texts: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Non-zero (indices, values) of sentence-transformers' vector of each
    text (bench/e2e.py `st_vectors`, max_seq_length 512)."""
    from bench.e2e import st_vectors
    out = {}
    for text, vector in zip(texts, st_vectors(TINY, texts).numpy()):
        indices = np.flatnonzero(vector)
        out[text] = (indices, vector[indices].astype(np.float64))
    gc.collect()
    return out


# --- the requests -----------------------------------------------------------


def _json(body) -> bytes:
    return json.dumps(body).encode()


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[:n] + f"... ({len(text):,} chars)"


def make_cases(texts: dict, model: str,
               bulk_priority: int = 0) -> dict[str, tuple[str, float,
                                                         Callable]]:
    """Request case name -> (kind, weight, make(rng) -> Request). Large
    requests carry `bulk_priority` (if not 0), as bulk indexing would."""
    bulk = {"priority": bulk_priority} if bulk_priority else {}
    queries, passages = texts["queries"], texts["passages"]
    pool = queries + passages
    longs = [t for t in texts["prefixes"] if len(t) < MAX_BODY]
    overs = [t for t in texts["prefixes"] if len(t) >= MAX_BODY]
    # The bodies of the long texts are made once (json.dumps of 1.5 MB
    # would take the clients' event loop a few ms a request).
    long_bodies = {
        t: _json({"inputs": t, "truncate": True, **bulk})
        for t in longs
    }
    over_bodies = {t: _json({"inputs": t, "truncate": True}) for t in overs}

    def small_sparse(rng):
        q = rng.choice(queries)
        return Request("small /embed_sparse", "small", "/embed_sparse",
                       _json({"inputs": q}), refs=[q], summary=repr(q))

    def small_openai(rng):
        q = rng.choice(queries)
        return Request("small /v1/embeddings", "small", "/v1/embeddings",
                       _json({"model": model, "input": q}), refs=[q],
                       openai=True, summary=repr(q))

    def large_batch(rng, kind="large"):
        batch = rng.sample(passages, MAX_INPUTS)
        return Request("large 32 passages", kind, "/embed_sparse",
                       _json({"inputs": batch, **bulk}), refs=batch,
                       summary=f"{MAX_INPUTS} passages, first "
                       f"{_short(batch[0])!r}")

    def large_truncate(rng, kind="large"):
        text = rng.choice(longs)
        return Request("large truncate 1.5 MB", kind, "/embed_sparse",
                       long_bodies[text], refs=[texts["prefixes"][text]],
                       summary=f"truncate, {_short(text)!r}")

    def bad(name, data, content_type="application/json"):
        return lambda rng: Request(f"bad {name}", "bad", "/embed_sparse",
                                   data, content_type, summary=data[:60])

    def over_inputs(rng):
        batch = rng.sample(pool, rng.randint(MAX_INPUTS + 1, 40))
        return Request("over-limit 33+ inputs", "over-limit",
                       "/embed_sparse", _json({"inputs": batch}), refs=batch,
                       summary=f"{len(batch)} inputs")

    def over_body(rng):
        text = rng.choice(overs)
        data = over_bodies[text]
        return Request("over-limit 2 MB body", "over-limit", "/embed_sparse",
                       data, refs=[texts["prefixes"][text]],
                       summary=f"truncate, {len(data):,} B body")

    def disconnect(rng):
        make = large_batch if rng.random() < 0.5 else large_truncate
        request = make(rng, kind="disconnect")
        request.case = "disconnect " + request.case.split(" ", 1)[1]
        request.cut = rng.uniform(*CUT)
        return request

    q = queries[0]
    bads = {
        "malformed JSON": bad("malformed JSON", b'{"inputs": ["what is'),
        "content type": bad("content type", _json({"inputs": q}),
                            "text/plain"),
        "inputs []": bad("inputs []", _json({"inputs": []})),
        'inputs ""': bad('inputs ""', _json({"inputs": ""})),
        "token id out of vocabulary": bad("token id out of vocabulary",
                                          _json({"inputs": [101, 10**6]})),
        "top_k -1": bad("top_k -1", _json({"inputs": q, "top_k": -1})),
        "over 512 tokens": bad("over 512 tokens",
                               _json({"inputs": texts["too_long"],
                                      "truncate": False})),
    }
    cases = {
        "small /embed_sparse": ("small", 0.33, small_sparse),
        "small /v1/embeddings": ("small", 0.12, small_openai),
        "large 32 passages": ("large", 0.15, large_batch),
        "large truncate 1.5 MB": ("large", 0.05, large_truncate),
        "over-limit 33+ inputs": ("over-limit", 0.05, over_inputs),
        "over-limit 2 MB body": ("over-limit", 0.02, over_body),
        "disconnect": ("disconnect", 0.13, disconnect),
    }
    for name, make in bads.items():
        cases["bad " + name] = ("bad", 0.15 / len(bads), make)
    return cases


# --- the clients ------------------------------------------------------------


async def send(session, url: str, request: Request) -> Record:
    """One request; the answer's body is kept for the check after the run."""
    import aiohttp
    t0 = time.monotonic()
    record = Record(request, t0, t0)
    try:
        async with session.post(
                url + request.path, data=request.data,
                headers={"Content-Type": request.content_type}) as response:
            record.status = response.status
            body = await response.read()
            good = 200 <= response.status < 300 and request.refs is not None
            record.body = body if good else body[:300]
    except asyncio.TimeoutError:
        record.error = "timeout"
    except aiohttp.ClientError as e:
        record.error = f"conn: {type(e).__name__}: {e}"[:200]
    record.t1 = time.monotonic()
    return record


async def send_and_cut(url: str, request: Request, timeout) -> Record:
    """A request on a connection of its own, closed after `request.cut` s
    unless the answer came first (then it is checked like any other)."""
    import aiohttp
    t0 = time.monotonic()
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=timeout) as session:
        task = asyncio.ensure_future(send(session, url, request))
        done, _ = await asyncio.wait({task}, timeout=request.cut)
        if done:
            return task.result()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    return Record(request, t0, time.monotonic(), error="cut")


async def client(index: int, url: str, cases: dict, seed: int,
                 deadline: float, records: list[Record]) -> None:
    import aiohttp
    rng = random.Random(f"{seed}-{index}")
    names = list(cases)
    weights = [cases[n][1] for n in names]
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=timeout) as session:
        while time.monotonic() < deadline:
            (name, ) = rng.choices(names, weights)
            request = cases[name][2](rng)
            if request.cut is not None:
                record = await send_and_cut(url, request, timeout)
            else:
                record = await send(session, url, request)
            records.append(record)
            if record.error and record.error != "cut":
                await asyncio.sleep(0.1)  # no busy loop on a dead server


async def run_clients(url: str, cases: dict, clients: int, seconds: float,
                      seed: int) -> tuple[list[Record], float, float]:
    records: list[Record] = []
    start = time.monotonic()
    await asyncio.gather(*(client(i, url, cases, seed, start + seconds,
                                  records) for i in range(clients)))
    return records, start, time.monotonic()


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (the server, its engine core, workers)."""
    out = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            out += process_tree(int(child))
    return out


def cpu_times(pids: dict[int, str]) -> dict[str, float]:
    """User + system CPU seconds so far by role (`pids`' value) or else by
    process name (from /proc)."""
    out: dict[str, float] = {}
    for pid, role in pids.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # gone
        name = role or stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        seconds = (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK")
        out[name] = out.get(name, 0.0) + seconds
    return out


def busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (from /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = map(
        int, fields[:8])
    busy = user + nice + system + irq + softirq + steal
    return busy / os.sysconf("SC_CLK_TCK")


# --- the /health prober -----------------------------------------------------


def probe(url: str, out: str) -> None:
    """GET /health every PROBE_EVERY s until SIGTERM; write
    [[monotonic start, s, status or error], ...] to `out`."""
    import requests
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    session = requests.Session()
    rows = []
    print("ready", flush=True)
    tick = time.monotonic()
    while not stop:
        t0 = time.monotonic()
        try:
            status = session.get(url + "/health", timeout=TIMEOUT).status_code
        except requests.RequestException as e:
            status = type(e).__name__
        rows.append([t0, time.monotonic() - t0, status])
        tick = max(tick + PROBE_EVERY, time.monotonic())
        time.sleep(max(0.0, tick - time.monotonic()))
    Path(out).write_text(json.dumps(rows))


def start_prober(url: str, out: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.load", "probe", url, str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit("load: the /health prober did not start")
    return proc


def stop_prober(proc: subprocess.Popen, out: Path) -> list:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=TIMEOUT + 10)
    if proc.returncode != 0:
        raise SystemExit(f"load: the /health prober exited {proc.returncode}")
    return json.loads(out.read_text())


# --- checking the answers ---------------------------------------------------


def parse(record: Record) -> list[tuple[np.ndarray, np.ndarray]]:
    """The answer's vectors as non-zero (indices, values)."""
    body = json.loads(record.body)
    if record.request.openai:
        vectors = []
        for i, item in enumerate(body["data"]):
            if item["index"] != i:
                raise ValueError(f"data[{i}] has index {item['index']}")
            dense = np.asarray(item["embedding"], dtype=np.float64)
            if dense.shape != (VOCAB, ):
                raise ValueError(f"{dense.shape[0]} floats, not {VOCAB}")
            indices = np.flatnonzero(dense)
            vectors.append((indices, dense[indices]))
        return vectors
    vectors = []
    for terms in body:
        indices = np.array([t["index"] for t in terms], dtype=np.int64)
        if len(set(indices.tolist())) != len(indices):
            raise ValueError("an index appears twice")
        vectors.append((indices,
                        np.array([t["value"] for t in terms], np.float64)))
    return vectors


def _dense(vector: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    out = np.zeros(VOCAB)
    out[vector[0]] = vector[1]
    return out


def mismatch(got: tuple, want: tuple) -> tuple[float, Optional[str]]:
    """Max |diff| of `got` from the reference `want`, and why it is not
    the reference (None when it is)."""
    a, b = _dense(got), _dense(want)
    diff = float(np.abs(a - b).max())
    # A term present on one side only must be below TOL on that side.
    odd = np.flatnonzero(((a != 0) != (b != 0)) & (np.maximum(a, b) >= TOL))
    if diff <= TOL and not odd.size:
        return diff, None
    return diff, (f"max |diff| {diff:.2e}, {odd.size} terms >= {TOL:g} on "
                  f"one side only (got {len(got[0])} terms, want "
                  f"{len(want[0])})")


def nearest(record: Record, refs: dict) -> str:
    """The reference text nearest to the first wrong vector of a wrong
    answer (another request's text: a misrouted answer)."""
    if "bad_input" not in record.extra:
        return ""
    got = _dense(parse(record)[record.extra["bad_input"]])
    texts = list(refs)
    diffs = [np.abs(got - _dense(refs[t])).max() for t in texts]
    best = int(np.argmin(diffs))
    return (f"; nearest reference {_short(texts[best])!r} (max |diff| "
            f"{diffs[best]:.2e})")


def check(record: Record, refs: dict) -> Optional[str]:
    """Why a 2xx answer to a good request is wrong (None when it is not)."""
    try:
        vectors = parse(record)
    except (ValueError, KeyError, TypeError) as e:
        return f"unreadable answer: {type(e).__name__}: {e}"
    want = record.request.refs
    record.extra["vectors"] = len(vectors)
    if len(vectors) != len(want):
        return f"{len(vectors)} vectors for {len(want)} inputs"
    for i, (got, text) in enumerate(zip(vectors, want)):
        diff, why = mismatch(got, refs[text])
        record.extra["max_diff"] = max(diff, record.extra.get("max_diff", 0))
        if why:
            record.extra["bad_input"] = i
            return f"input {i} {_short(text)!r}: {why}"
    return None


# --- figures ----------------------------------------------------------------


def percentile(values: list[float], q: float) -> Optional[float]:
    """Nearest-rank percentile; None when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(round(q * len(ordered) / 100, 6)) - 1)]


def latency(ms: list[float]) -> dict:
    return {"n": len(ms), "p50_ms": percentile(ms, 50),
            "p99_ms": percentile(ms, 99), "max_ms": max(ms, default=None)}


def status_class(record: Record) -> str:
    if record.error == "cut":
        return "cut"
    if record.error == "timeout":
        return "timeout"
    if record.error:
        return "conn"
    return f"{record.status // 100}xx"


def outcome(record: Record) -> str:
    """ok, wrong, lost, 5xx, over_limit_accepted or unexpected."""
    req, cls = record.request, status_class(record)
    if cls == "cut":
        return "ok"
    if cls in ("timeout", "conn"):
        return "lost"
    if cls == "5xx":
        return "5xx"
    if record.wrong:
        return "wrong"
    if req.kind == "bad":
        return "ok" if cls == "4xx" else "unexpected"
    if req.kind == "over-limit":
        if cls == "2xx":
            return "over_limit_accepted"
        # TEI 1.9: too many inputs is a Validation error (422); a body over
        # the payload limit is the body limit's 413.
        expected = 413 if "body" in req.case else 422
        return "ok" if record.status == expected else "unexpected"
    return "ok" if cls == "2xx" else "unexpected"


def _cases(records) -> str:
    count = Counter(r.request.case for r in records)
    return ", ".join(f"{n} {case}" for case, n in count.most_common()) or "-"


def in_flight(records: list[Record], t: float) -> str:
    return _cases(r for r in records if r.t0 <= t < r.t1)


def answered(records: list[Record], t0: float, t1: float) -> str:
    """The requests answered while a probe waited: an answer that the
    server builds on its event loop holds /health up."""
    return _cases(r for r in records
                  if t0 <= r.t1 <= t1 + 0.005 and r.error is None)


def summarize(records: list[Record], probes: list, start: float,
              end: float) -> dict:
    kinds = {k: Counter() for k in KINDS}
    cases: dict[str, Counter] = {}
    outcomes: Counter = Counter()
    examples: dict[str, list] = {}
    for r in records:
        cls, out = status_class(r), outcome(r)
        kinds[r.request.kind].update(["requests", cls])
        if out != "ok":
            kinds[r.request.kind][out] += 1
        cases.setdefault(r.request.case, Counter()).update(
            [str(r.status) if r.status else r.error.split(":")[0]])
        outcomes[out] += 1
        if out != "ok" and len(examples.setdefault(out, [])) < EXAMPLES:
            examples[out].append({
                "case": r.request.case, "request": str(r.request.summary),
                "at_s": round(r.t0 - start, 3), "ms": round(r.ms, 1),
                "status": r.status, "error": r.error, "wrong": r.wrong,
                "body": r.body[:300].decode(errors="replace")
                if out != "over_limit_accepted" else None})
    by_case: dict[str, list[float]] = {}
    for r in records:
        if r.status:
            by_case.setdefault(r.request.case, []).append(r.ms)
    small = [r for r in records if r.request.kind == "small" and r.status]
    health = [ms * 1000 for _, ms, _ in probes]
    slow = sorted(probes, key=lambda p: -p[1])[:EXAMPLES]
    cut_early = sum(1 for r in records
                    if r.request.kind == "disconnect" and r.status)
    return {
        "requests": len(records),
        "window_s": end - start,
        "requests_per_s": len(records) / (end - start),
        "good_texts_per_s": sum(len(r.request.refs) for r in records
                                if r.request.refs and outcome(r) in (
                                    "ok", "over_limit_accepted")
                                and r.status) / (end - start),
        "kinds": {k: dict(v) for k, v in kinds.items()},
        "cases": {k: dict(v) for k, v in sorted(cases.items())},
        "case_latency": {k: latency(v) for k, v in sorted(by_case.items())},
        "outcomes": dict(outcomes),
        "wrong": outcomes["wrong"],
        "lost": outcomes["lost"],
        # More vectors than inputs (counted among the wrong answers too).
        "duplicated": sum(1 for r in records if r.request.refs and r.extra.get(
            "vectors", 0) > len(r.request.refs)),
        "status_5xx": outcomes["5xx"],
        "unexpected_status": outcomes["unexpected"],
        "over_limit_accepted": outcomes["over_limit_accepted"],
        "max_abs_diff": max((r.extra.get("max_diff", 0.0) for r in records),
                            default=None),
        "texts_answered": sum(len(r.request.refs) for r in records
                              if r.request.refs and r.status
                              and r.status < 300),
        "disconnects": sum(1 for r in records if r.error == "cut"),
        "disconnect_answered_before_cut": cut_early,
        "examples": examples,
        "latency": {
            "small": latency([r.ms for r in small]),
            "small /embed_sparse": latency(
                [r.ms for r in small if not r.request.openai]),
            "small /v1/embeddings": latency(
                [r.ms for r in small if r.request.openai]),
            "/health": latency(health),
        },
        "health_not_200": sum(1 for p in probes if p[2] != 200),
        "health_slowest": [{
            "at_s": round(t - start, 3), "ms": round(s * 1000, 1),
            "status": status, "in_flight": in_flight(records, t),
            "answered_meanwhile": answered(records, t, t + s)
        } for t, s, status in slow],
    }


# --- the run ----------------------------------------------------------------


def machine() -> dict:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M)
    return {"cpu": model.group(1) if model else "unknown",
            "cores": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0))}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def server_log(path: str) -> dict:
    """Error lines of the server's log (PIDs dropped) before it was told to
    stop, and after (stopping kills the engine: an EngineDeadError there is
    the stop's)."""
    lines = Path(path).read_text(errors="replace").splitlines()
    stop = next((i for i, line in enumerate(lines)
                 if "shutdown triggered" in line), len(lines))
    bad = [re.sub(r"^.*?(ERROR|Traceback)", r"\1", line)
           for line in lines[:stop] if "ERROR" in line or "Traceback" in line]
    return {"path": path, "lines": len(lines), "error_lines": len(bad),
            "error_lines_while_stopping": sum(
                1 for line in lines[stop:] if "ERROR" in line),
            "first_errors": bad[:2 * EXAMPLES]}


METRICS = ("vllm:request_success_total", "vllm:prompt_tokens_total",
           "vllm:num_requests_running", "vllm:num_requests_waiting")


def engine_metrics(server: SpladeServer) -> dict:
    """A few of the server's Prometheus counters after the load: finished
    sequences by reason (an input of a dropped request that the engine
    aborted counts as `abort`), prompt tokens, sequences still queued."""
    import urllib.request
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name in METRICS:
            reason = re.search(r'finished_reason="(\w+)"', line)
            key = name + (f"[{reason.group(1)}]" if reason else "")
            out[key] = out.get(key, 0) + float(line.rsplit(" ", 1)[1])
    return out


def final_check(server: SpladeServer, query: str, refs: dict) -> dict:
    alive = server.proc.poll() is None
    try:
        health = server.health()
    except OSError as e:
        health = f"{type(e).__name__}: {e}"
    request = Request("final", "small", "/embed_sparse",
                      _json({"inputs": query}), refs=[query])
    try:
        status, body = server.request("/embed_sparse", {"inputs": query},
                                      timeout=TIMEOUT)
    except OSError as e:
        status, body = None, str(e).encode()
    record = Record(request, 0, 0, status=status, body=body)
    wrong = check(record, refs) if status == 200 else f"status {status}"
    try:
        metrics = engine_metrics(server)
    except OSError as e:
        metrics = {"error": f"{type(e).__name__}: {e}"}
    return {"server_alive": alive, "health": health, "good_request": status,
            "matches_reference": wrong is None, "why": wrong,
            "engine_metrics": metrics}


def warm_up(server: SpladeServer, cases: dict, refs: dict) -> int:
    """One small and one large request; the run stops unless both are
    answered 200 (a build without /embed_sparse cannot be measured).
    Returns the number of texts sent."""
    rng = random.Random(0)
    sent = 0
    for name in ("small /embed_sparse", "large 32 passages"):
        request = cases[name][2](rng)
        status, body = server.request(request.path, raw=request.data)
        if status != 200:
            raise SystemExit(f"load: warm-up {name} answered {status}: "
                             f"{body[:300]!r}")
        why = check(Record(request, 0, 0, status=status, body=body), refs)
        if why:
            print(f"load: warm-up {name}: wrong answer: {why}", flush=True)
        sent += len(request.refs)
    return sent


def main(out_path: str, seconds: float, clients: int, seed: int,
         bulk_priority: int) -> None:
    from importlib.metadata import version
    result = {"clients": clients, "seconds": seconds, "seed": seed,
              "bulk_priority": bulk_priority,
              "vllm": version("vllm"), "machine": machine(),
              "loadavg_at_start": loadavg(),
              "env": {k: os.environ.get(k) for k in (
                  "VLLM_CPU_KVCACHE_SPACE", "VLLM_CPU_OMP_THREADS_BIND",
                  "VLLM_ENABLE_V1_MULTIPROCESSING")}}
    texts = make_texts(seed)
    pool = texts["queries"] + texts["passages"]
    refs = reference(pool + list(dict.fromkeys(texts["prefixes"].values())))
    result |= {"queries": len(texts["queries"]),
               "passages": len(texts["passages"])}
    probe_out = Path(tempfile.mkdtemp(prefix="load-")) / "health.json"
    extra_args: tuple[str, ...] = ("--disable-uvicorn-access-log", )
    if bulk_priority:
        extra_args += ("--scheduling-policy", "priority")
    with SpladeServer(str(TINY), hf_overrides=SPLADE_OVERRIDES,
                      extra_args=extra_args) as server:
        cases = make_cases(texts, server.model, bulk_priority)
        # Texts the engine is sent outside the run: warm-up and final check.
        result["texts_outside_run"] = warm_up(server, cases, refs) + 1
        result["loadavg_before_run"] = loadavg()
        prober = start_prober(server.url, probe_out)
        try:
            pids = dict.fromkeys(process_tree(server.proc.pid), "")
            pids |= {server.proc.pid: "api server", prober.pid: "prober",
                     os.getpid(): "clients"}
            cpu, busy = cpu_times(pids), busy_seconds()
            records, start, end = asyncio.run(
                run_clients(server.url, cases, clients, seconds, seed))
            cpu_after, busy = cpu_times(pids), busy_seconds() - busy
        finally:
            probes = stop_prober(prober, probe_out)
            shutil.rmtree(probe_out.parent)
        ours = {name: round(cpu_after.get(name, 0.0) - cpu.get(name, 0.0), 2)
                for name in cpu_after}
        # The rest of the machine's busy time: other jobs sharing the cores.
        result["cpu_s_by_process"] = ours | {
            "everything else": round(busy - sum(ours.values()), 2)}
        result["loadavg_after_run"] = loadavg()
        result["final"] = final_check(server, texts["queries"][0], refs)
    result["server_log"] = server_log(server.log.name)
    wrong = 0
    for r in records:
        if r.request.refs is not None and r.status and r.status < 300:
            r.wrong = check(r, refs)
            if r.wrong and wrong < EXAMPLES:
                r.wrong += nearest(r, refs)
                wrong += 1
    result |= summarize(records, probes, start, end)
    Path(out_path).write_text(json.dumps(result, indent=1))
    print(table(result))


# --- the table --------------------------------------------------------------


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1f}"


def _e(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.1e}"


def table(r: dict) -> str:
    m = r["machine"]
    lines = [
        f"load: {r['clients']} clients for {r['seconds']:g} s (seed "
        f"{r['seed']}"
        + (f", --scheduling-policy priority, large requests at priority "
           f"{r['bulk_priority']}" if r.get("bulk_priority") else "")
        + f"), vllm {r['vllm']}, on {m['cpu']}, "
        f"{m['usable_cores']} cores; load average "
        f"{r['loadavg_before_run']} before the run",
        "",
        f"{'kind':12s} {'requests':>8s} {'2xx':>6s} {'4xx':>6s} {'5xx':>5s} "
        f"{'conn':>5s} {'timeout':>7s} {'cut':>5s}  other",
    ]
    for kind, c in r["kinds"].items():
        other = ", ".join(f"{k} {c[k]}" for k in (
            "wrong", "lost", "unexpected", "over_limit_accepted") if c.get(k))
        lines.append(
            f"{kind:12s} {c.get('requests', 0):8d} {c.get('2xx', 0):6d} "
            f"{c.get('4xx', 0):6d} {c.get('5xx', 0):5d} {c.get('conn', 0):5d} "
            f"{c.get('timeout', 0):7d} {c.get('cut', 0):5d}  {other or '-'}")
    lines += ["", f"{'case':28s} {'p50 ms':>8s} {'max ms':>8s}  answers"]
    for case, c in r["cases"].items():
        lat = r["case_latency"].get(case, {})
        lines.append(
            f"{case:28s} {_ms(lat.get('p50_ms')):>8s} "
            f"{_ms(lat.get('max_ms')):>8s}  " +
            ", ".join(f"{k} x{n}" for k, n in sorted(c.items())))
    lines += ["", f"{'latency':22s} {'n':>6s} {'p50 ms':>8s} {'p99 ms':>8s} "
              f"{'max ms':>8s}"]
    for name, lat in r["latency"].items():
        lines.append(f"{name:22s} {lat['n']:6d} {_ms(lat['p50_ms']):>8s} "
                     f"{_ms(lat['p99_ms']):>8s} {_ms(lat['max_ms']):>8s}")
    p99 = r["latency"]["/health"]["p99_ms"]
    met = p99 is not None and p99 < HEALTH_TARGET_MS
    f, cores = r["final"], m["cores"]
    done = f["engine_metrics"].get("vllm:request_success_total[stop]")
    texts = (f"texts answered {r['texts_answered']} (+"
             f"{r['texts_outside_run']} warm-up and final check)")
    if done is None:
        texts += "; the engine's counters are not available"
    else:
        extra = done - r["texts_answered"] - r["texts_outside_run"]
        texts += (f"; the engine finished {done:g} sequences: {extra:g} for "
                  f"dropped requests")
    lines += [
        "",
        f"/health p99 < {HEALTH_TARGET_MS:g} ms: {'met' if met else 'missed'}"
        f" ({_ms(p99)} ms; {r['health_not_200']} probes not 200)",
        f"wrong answers {r['wrong']} (max |diff| of the vectors checked "
        f"{_e(r['max_abs_diff'])}), lost {r['lost']}, duplicated "
        f"{r['duplicated']}, 5xx "
        f"{r['status_5xx']}, unexpected status {r['unexpected_status']}, "
        f"over-limit accepted {r['over_limit_accepted']}, disconnects "
        f"{r['disconnects']} (+{r['disconnect_answered_before_cut']} answered"
        f" before the cut)",
        f"{r['requests']} requests in {r['window_s']:.1f} s: "
        f"{r['requests_per_s']:.1f} requests/s, "
        f"{r['good_texts_per_s']:.1f} good texts/s",
        f"after the load: server {'alive' if f['server_alive'] else 'DEAD'}, "
        f"/health {f['health']}, a good request {f['good_request']} "
        f"{'matching' if f['matches_reference'] else 'NOT matching'} the "
        f"reference",
        f"server log: {r['server_log']['error_lines']} error lines before "
        f"the stop ({r['server_log']['error_lines_while_stopping']} while "
        f"stopping)",
        "engine after the load: " + ", ".join(
            f"{k.removeprefix('vllm:')} {v:g}" if isinstance(v, float)
            else f"{k} {v}"
            for k, v in f["engine_metrics"].items() if v),
        texts,
        f"CPU s in the {r['window_s']:.1f} s (of {r['window_s'] * cores:.0f}"
        f" on {cores} cores): " + ", ".join(
            f"{k} {v:.1f}" for k, v in r["cpu_s_by_process"].items() if v),
    ]
    for line in r["server_log"]["first_errors"][:3]:
        lines.append(f"  server log: {line[:200]}")
    for s in r["health_slowest"]:
        lines.append(f"  slow /health at {s['at_s']:.2f} s: {s['ms']:.0f} ms;"
                     f" answered meanwhile: {s['answered_meanwhile']}; in "
                     f"flight: {s['in_flight']}")
    for out, items in r["examples"].items():
        for e in items:
            lines.append(f"  {out}: {e['case']} sent at {e['at_s']:.2f} s,"
                         f" {e['ms']:.0f} ms: {e['request']}: status "
                         f"{e['status']} "
                         f"{e['error'] or ''} {e['wrong'] or ''}".rstrip())
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["probe"]:
        probe(sys.argv[2], sys.argv[3])
        sys.exit()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--bulk-priority", type=int, default=0,
        help="serve with --scheduling-policy priority and send the large "
        "requests at this priority (queries stay at 0; larger is later)")
    args = parser.parse_args()
    main(args.out, args.seconds, args.clients, args.seed, args.bulk_priority)
