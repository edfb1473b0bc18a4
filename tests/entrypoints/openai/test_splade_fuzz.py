# SPDX-License-Identifier: Apache-2.0
"""Requests generated from the served model's own OpenAPI schema
(schemathesis), on the routes that serve SPLADE: never a 5xx and never a
hang (each request is given 60 s), and afterwards the server is healthy
and still gives the reference vector.

The plain SPLADE model is fuzzed on stock vLLM + the vllm-splade plugin
(the official wheel's path), the inference-free Router on the patched
build (its `route` fields are the series'). Seeded, so a run is
repeatable. In `make test`: one seed, 60 examples per
route in the fuzzing phase (~5,300 requests, ~1 min). SPLADE_FUZZ_SEEDS
(space-separated) and SPLADE_FUZZ_EXAMPLES scale it up for `make fuzz`;
SPLADE_FUZZ_REPORT names a folder for the reports (per seed: schemathesis'
JSON report, JUnit, a pytest file that replays any failure, its log; and
summary.json over all seeds). Answers are counted from the server's access
log, so they are what the server sent, whatever the client made of it.
"""
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import torch

ROUTES = r"^/(embed_sparse|v1/embeddings|pooling|tokenize|detokenize)$"
EXAMPLES = int(os.environ.get("SPLADE_FUZZ_EXAMPLES", "60"))
SEEDS = [int(s) for s in os.environ.get("SPLADE_FUZZ_SEEDS", "20261203").split()]
ACCESS_LINE = re.compile(r'"[A-Z]+ (\S+) HTTP/[0-9.]+" (\d{3})')


def run_schemathesis(url: str, seed: int, report_dir: Path,
                     api_key: str | None = None) -> dict:
    """One seeded `st run` against the server (with its API key, if it has
    one); its JSON run report."""
    report_dir.mkdir(parents=True, exist_ok=True)
    st = Path(sys.executable).with_name("st")
    command = [
        str(st), "run", f"{url}/openapi.json", "--include-path-regex",
        ROUTES, "--checks", "not_a_server_error", "--phases",
        "examples,coverage,fuzzing", "--max-examples",
        str(EXAMPLES), "--seed",
        str(seed), "--generation-database", "none", "--request-timeout",
        "60", "--no-shrink", "--continue-on-failure", "--no-color",
        "--report", "json,junit,pytest", "--report-dir",
        str(report_dir)
    ]
    if api_key:
        command += ["--header", f"Authorization: Bearer {api_key}"]
    result = subprocess.run(command,
                            capture_output=True,
                            text=True,
                            cwd=report_dir,
                            timeout=3600)
    (report_dir / "schemathesis.log").write_text(result.stdout +
                                                 result.stderr)
    reports = sorted(report_dir.glob("json-*.json"), key=os.path.getmtime)
    assert reports, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(reports[-1].read_text())


def answers(access_log: str) -> dict[str, dict[str, int]]:
    """Responses by route and status class, from the access log."""
    counts: dict[str, dict[str, int]] = {}
    for path, status in ACCESS_LINE.findall(access_log):
        per_route = counts.setdefault(path.split("?")[0], {})
        kind = f"{status[0]}xx"
        per_route[kind] = per_route.get(kind, 0) + 1
    return counts


def summarize(reports: list[dict], by_route: dict) -> dict:
    """The runs in figures. A timeout or a dropped connection is one of
    schemathesis' errors; a 5xx also fails its not_a_server_error check."""
    total = {"2xx": 0, "4xx": 0, "5xx": 0}
    for per_route in by_route.values():
        for kind, n in per_route.items():
            total[kind] = total.get(kind, 0) + n
    return {
        "requests": sum(total.values()),
        **total,
        "failed checks": sum(len(r["failures"]) for r in reports),
        "hangs or errors": sum(
            len(r["errors"]) + r["test_cases"]["errored"] for r in reports),
        "test cases": sum(r["test_cases"]["generated"] for r in reports),
        "routes": min(r["operations"]["tested"] for r in reports),
        "by route": by_route,
        "seconds": round(sum(r["running_time"] for r in reports)),
        "seeds": SEEDS,
        "examples per route": EXAMPLES,
    }


def fuzz(server, report_dir: Path) -> dict:
    log = Path(server.log.name)
    start = log.stat().st_size
    reports = [
        run_schemathesis(server.url, seed, report_dir / f"seed-{seed}",
                         server.api_key)
        for seed in SEEDS
    ]
    with log.open("rb") as f:
        f.seek(start)
        access_log = f.read().decode(errors="replace")
    summary = summarize(reports, answers(access_log))
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\nfuzz: {json.dumps(summary)}")
    return {"summary": summary, "reports": reports}


def report_folder(tmp_path_factory, name: str) -> Path:
    folder = os.environ.get("SPLADE_FUZZ_REPORT")
    if folder:
        return Path(folder) / name
    return tmp_path_factory.mktemp(f"schemathesis-{name}")


@pytest.fixture(scope="module")
def fuzz_report(stock_splade_server, tmp_path_factory) -> dict:
    """On stock vLLM + the plugin, what users of the official wheel run:
    the endpoint and the models are the plugin's, the rest stock's."""
    return fuzz(stock_splade_server, report_folder(tmp_path_factory,
                                                   "splade"))


@pytest.fixture(scope="module")
def router_fuzz_report(router_server, tmp_path_factory) -> dict:
    """The same on an inference-free sparse encoder, whose routes the
    requests' `route` (/v1/embeddings, /pooling) and `prompt_name`
    (/embed_sparse) pick: the schema's examples name them."""
    return fuzz(router_server, report_folder(tmp_path_factory, "router"))


def assert_no_5xx(report: dict) -> None:
    summary = report["summary"]
    failures = [f for r in report["reports"] for f in r["failures"]]
    errors = [e for r in report["reports"] for e in r["errors"]]
    assert summary["routes"] == 5, summary
    assert summary["requests"] >= min(1000, 30 * EXAMPLES), summary
    assert summary["5xx"] == 0, summary
    assert failures == [], json.dumps(failures[:3], indent=1)[:4000]
    assert summary["hangs or errors"] == 0, json.dumps(errors[:3],
                                                       indent=1)[:4000]
    # Both kinds of answer came up: the schema's generator reaches valid
    # requests, not only ones refused at the door.
    for route in ["/embed_sparse", "/v1/embeddings", "/pooling"]:
        assert summary["by route"][route]["2xx"] > 0, summary
        assert summary["by route"][route]["4xx"] > 0, summary


def test_generated_requests_never_get_a_5xx(fuzz_report):
    assert_no_5xx(fuzz_report)


def test_healthy_and_right_after_fuzzing(fuzz_report, stock_splade_server,
                                         offline_vectors):
    assert stock_splade_server.health() == 200
    text = next(iter(offline_vectors))
    status, data = stock_splade_server.request("/embed_sparse",
                                               {"inputs": text})
    assert status == 200, data[:300]
    got = torch.zeros(offline_vectors[text].numel())
    for term in json.loads(data)[0]:
        got[term["index"]] = term["value"]
    want = offline_vectors[text]
    assert torch.equal(got > 0, want > 0)
    assert (got - want).abs().max().item() <= 1e-5


def test_the_schema_offers_routes(router_server):
    """The generated requests carry `route` and `prompt_name`, with the
    route names among the schema's examples."""
    with urllib.request.urlopen(router_server.url + "/openapi.json") as r:
        schemas = json.loads(r.read())["components"]["schemas"]
    for name in ("EmbeddingCompletionRequest", "PoolingCompletionRequest"):
        assert "query" in json.dumps(schemas[name]["properties"]["route"])
    assert "prompt_name" in schemas["EmbedSparseRequest"]["properties"]


def test_router_requests_never_get_a_5xx(router_fuzz_report, router_server,
                                         splade_tiny_router):
    assert_no_5xx(router_fuzz_report)
    assert router_server.health() == 200
    from sentence_transformers import SparseEncoder
    encoder = SparseEncoder(splade_tiny_router, device="cpu")
    text = "what causes aging fast"
    for route, encode in (("query", encoder.encode_query),
                          ("document", encoder.encode_document)):
        status, data = router_server.request("/embed_sparse", {
            "inputs": text,
            "prompt_name": route
        })
        assert status == 200, data[:300]
        want = encode([text], convert_to_tensor=True).to_dense()[0].float()
        got = torch.zeros(want.numel())
        for term in json.loads(data)[0]:
            got[term["index"]] = term["value"]
        assert torch.equal(got > 0, want > 0)
        assert (got - want).abs().max().item() <= 1e-5
