# SPDX-License-Identifier: Apache-2.0
"""Requests generated from the served model's own OpenAPI schema
(schemathesis), on the routes that serve SPLADE: never a 5xx and never a
hang (each request is given 60 s), and afterwards the server is healthy
and still gives the reference vector.

Seeded, so a run is repeatable; SPLADE_FUZZ_EXAMPLES (examples per route
in the fuzzing phase, default 60: about 1,900 requests in ~2 min) scales it
up for `make fuzz`, and SPLADE_FUZZ_REPORT names a folder for the run's
reports (JSON summary, JUnit, and a pytest file that replays any failure).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROUTES = r"^/(embed_sparse|v1/embeddings|pooling|tokenize|detokenize)$"
EXAMPLES = int(os.environ.get("SPLADE_FUZZ_EXAMPLES", "60"))
SEED = int(os.environ.get("SPLADE_FUZZ_SEED", "20261203"))


def run_schemathesis(url: str, report_dir: Path) -> dict:
    """One `st run` against the server; its JSON run report."""
    report_dir.mkdir(parents=True, exist_ok=True)
    st = Path(sys.executable).with_name("st")
    command = [
        str(st), "run", f"{url}/openapi.json", "--include-path-regex",
        ROUTES, "--checks", "not_a_server_error", "--phases",
        "examples,coverage,fuzzing", "--max-examples",
        str(EXAMPLES), "--seed",
        str(SEED), "--generation-deterministic", "--request-timeout", "60",
        "--no-shrink", "--continue-on-failure", "--no-color",
        "--report", "json,junit,pytest", "--report-dir",
        str(report_dir)
    ]
    result = subprocess.run(command,
                            capture_output=True,
                            text=True,
                            cwd=report_dir,
                            timeout=3600)
    (report_dir / "schemathesis.log").write_text(result.stdout +
                                                 result.stderr)
    reports = sorted(report_dir.glob("*.json"), key=os.path.getmtime)
    assert reports, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(reports[-1].read_text())


ACCESS_LINE = re.compile(r'"[A-Z]+ (\S+) HTTP/[0-9.]+" (\d{3})')


def answers(access_log: str) -> dict[str, dict[str, int]]:
    """Responses by route and status class, from the server's access log
    (what the server answered, whatever the client made of it)."""
    counts: dict[str, dict[str, int]] = {}
    for path, status in ACCESS_LINE.findall(access_log):
        route = path.split("?")[0]
        per_route = counts.setdefault(route, {})
        kind = f"{status[0]}xx"
        per_route[kind] = per_route.get(kind, 0) + 1
    return counts


def summarize(report: dict, by_route: dict) -> dict:
    """The run in figures: requests and answers by status class; a
    timeout or a dropped connection is one of schemathesis' errors."""
    total: dict[str, int] = {}
    for per_route in by_route.values():
        for kind, n in per_route.items():
            total[kind] = total.get(kind, 0) + n
    return {
        "test cases": report["test_cases"]["generated"],
        "requests": sum(total.values()),
        **dict(sorted(total.items())),
        "5xx (schemathesis)": len(report["failures"]),
        "hangs or errors": len(report["errors"]) +
        report["test_cases"]["errored"],
        "routes": report["operations"]["tested"],
        "by route": by_route,
        "seconds": round(report["running_time"]),
        "seed": SEED,
        "examples per route": EXAMPLES,
    }


@pytest.fixture(scope="module")
def fuzz_report(splade_server, tmp_path_factory) -> dict:
    folder = os.environ.get("SPLADE_FUZZ_REPORT")
    report_dir = (Path(folder) if folder else
                  tmp_path_factory.mktemp("schemathesis"))
    log = Path(splade_server.log.name)
    start = log.stat().st_size
    report = run_schemathesis(splade_server.url, report_dir)
    with log.open("rb") as f:
        f.seek(start)
        access_log = f.read().decode(errors="replace")
    report["summary"] = summary = summarize(report, answers(access_log))
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    print(f"\nfuzz: {json.dumps(summary)}")
    return report


def test_generated_requests_never_get_a_5xx(fuzz_report):
    summary = fuzz_report["summary"]
    assert summary["routes"] == 5, fuzz_report["operations"]
    assert summary["requests"] >= min(1000, 30 * EXAMPLES), summary
    assert summary.get("5xx", 0) == 0, summary
    assert fuzz_report["failures"] == [], json.dumps(
        fuzz_report["failures"][:3], indent=1)[:4000]
    assert summary["hangs or errors"] == 0, json.dumps(
        fuzz_report["errors"][:3], indent=1)[:4000]
    # Both kinds of answer came up: the schema's generator reaches valid
    # requests, not only ones refused at the door.
    assert summary["2xx"] > 0 and summary["4xx"] > 0, summary


def test_healthy_and_right_after_fuzzing(fuzz_report, splade_server,
                                         offline_vectors):
    assert splade_server.health() == 200
    text = next(iter(offline_vectors))
    status, data = splade_server.request("/embed_sparse", {"inputs": text})
    assert status == 200, data[:300]
    got = torch.zeros(offline_vectors[text].numel())
    for term in json.loads(data)[0]:
        got[term["index"]] = term["value"]
    want = offline_vectors[text]
    assert torch.equal(got > 0, want > 0)
    assert (got - want).abs().max().item() <= 1e-5
