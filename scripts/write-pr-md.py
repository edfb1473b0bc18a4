#!/usr/bin/env python3
"""Write one PR description (to stdout) from its commits and the outputs of
the last runs: build/lint.log, build/test-summary.txt,
build/vllm-tests-summary.md and docs/performance*. Nothing is typed in by
hand: a missing run says so.

Usage: write-pr-md.py TREE BRANCH FIRST LAST TITLE "DEPENDS-ON..."
(the PR is the commits FIRST..LAST of the series, 1-based, BRANCH's tip
being commit LAST)."""
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 500  # vLLM asks for an RFC above this in the model files.
MODEL_PREFIX = "vllm/model_executor/models/"
# PRs that change shared code for one family: reviewers agree on the RFC
# first (its "For review" section argues them), which is opened as a vLLM
# issue before these PRs.
NEEDS_RFC = {
    name: "docs/rfcs/inference-free-sparse-encoders.md"
    for name in ("inference-free", "inference-free-api")
}


def git(tree: str, *args: str) -> str:
    return subprocess.run(["git", "-C", tree, *args],
                          check=True,
                          capture_output=True,
                          text=True).stdout


# Which of vLLM 0.34.0's CI jobs collect a test, by its marks
# (.buildkite/test_areas/models_language.yaml, hardware_tests/cpu.yaml,
# test_areas/entrypoints.yaml).
JUNIT = ROOT / "build/vllm-tests-run/fast.xml"


def jobs_of(path: str, marks: set[str]) -> str:
    if path.startswith("tests/entrypoints/pooling/"):
        return "GPU per PR (Entrypoints: pooling)"
    if not path.startswith("tests/models/language/"):
        return "GPU per PR"
    jobs = ["GPU per PR (core_model)" if "core_model" in marks else
            "GPU nightly (Extended Pooling)"]
    if "cpu_model" in marks and path.startswith("tests/models/language/pooling/"):
        jobs.append("CPU per PR (cpu_model, 25-min shards)")
    return ", ".join(jobs)


def test_marks(text: str) -> dict[str, set[str]]:
    """Each test function's pytest marks: its decorators' and the module's."""
    module = set(re.findall(r"pytest\.mark\.(\w+)",
                            "".join(re.findall(r"^pytestmark = .*$", text, re.M))))
    marks: dict[str, set[str]] = {}
    pending: set[str] = set()
    for line in text.splitlines():
        if line.startswith("@"):
            pending |= set(re.findall(r"pytest\.mark\.(\w+)", line))
        elif m := re.match(r"(?:async )?def (test_\w+)", line):
            marks[m.group(1)] = pending | module
            pending = set()
        elif not line.startswith((" ", ")", "]")):
            pending = set()
    return marks


def ci_time(tree: str, branch: str, span: str) -> None:
    """The test functions this PR adds, the seconds they took in the last
    `make test` (the series lane: this project's CPU build, compiled, on the
    machine that ran it) and the vLLM CI jobs their marks put them in."""
    added: dict[str, list[str]] = {}
    path = None
    for line in git(tree, "diff", span, "--", "tests/").splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif path and (m := re.match(r"\+(?:async )?def (test_\w+)", line)):
            added.setdefault(path, []).append(m.group(1))
    print("## CI time\n")
    if not added:
        print("No test functions added.\n")
        return
    seconds: dict[tuple[str, str], float] = {}
    if JUNIT.is_file():
        for case in ET.parse(JUNIT).iter("testcase"):
            key = (case.get("classname", "").replace(".", "/") + ".py",
                   case.get("name", "").split("[")[0])
            seconds[key] = seconds.get(key, 0.0) + float(case.get("time", 0))
    else:
        print("(no series lane run yet: `make test`, then `make pr`)\n")
    print("| test file | tests added | seconds (last `make test`) | vLLM CI jobs |")
    print("|---|---|---|---|")
    total = 0.0
    for path, names in added.items():
        marks = test_marks(git(tree, "show", f"{branch}:{path}"))
        secs = sum(seconds.get((path, n), 0.0) for n in names)
        total += secs
        jobs = sorted({jobs_of(path, marks.get(n, set())) for n in names})
        print(f"| `{path}` | {len(names)} | {secs:.0f} | {'; '.join(jobs)} |")
    print(f"\nIn all {total / 60:.1f} min on this project's 2-core CPU "
          "build; vLLM's CPU shards and GPUs are faster.\n")


def section(path: str, what: str) -> str:
    file = ROOT / path
    if not file.is_file():
        return f"(no {what} yet: run it, then `make pr` again)\n"
    return file.read_text().strip() + "\n"


def main() -> None:
    tree, branch, first, last, title, deps = sys.argv[1:7]
    count = int(last) - int(first) + 1
    span = f"{branch}~{count}..{branch}"
    commits = git(tree, "log", "--reverse", "--format=%H", span).split()
    numstat = [
        line.split("\t")
        for line in git(tree, "diff", "--numstat", span).split("\n") if line
    ]
    model_lines = sum(
        int(a) + int(d) for a, d, f in numstat if f.startswith(MODEL_PREFIX))
    tests = [f for _, _, f in numstat if f.startswith("tests/")]

    print(f"# {title}\n")
    which = f"Patch {first}" if first == last else f"Patches {first}-{last}"
    print(f"{which} of the splade-for-vllm series.", end=" ")
    if deps:
        print(f"Depends on: {', '.join(deps.split())} (merge those first; "
              "this branch is stacked on them).\n")
    else:
        print("Depends on nothing but vLLM main.\n")
    rfc = NEEDS_RFC.get(branch.rsplit("/", 1)[-1])
    if rfc:
        print(f"**Needs its RFC agreed first** (`{rfc}` of splade-for-vllm, "
              "opened as a vLLM issue; its \"For review\" section argues the "
              "`route` field against `extra_kwargs`).\n")
    print("## Purpose\n")
    for c in commits:
        subject = git(tree, "log", "-1", "--format=%s", c).strip()
        body = git(tree, "log", "-1", "--format=%b", c)
        body = "\n".join(line for line in body.splitlines()
                         if not line.startswith("Signed-off-by:")).strip()
        print(f"### {subject}\n\n{body}\n")
    print("## Size\n")
    print(f"{len(numstat)} files, "
          f"+{sum(int(a) for a, _, _ in numstat)} "
          f"-{sum(int(d) for _, d, _ in numstat)} lines; model files: "
          f"{model_lines} lines changed "
          f"({'under' if model_lines < LIMIT else 'OVER'} the {LIMIT}-line "
          "RFC threshold).\n")
    print("| file | + | - |\n|---|---|---|")
    for a, d, f in numstat:
        print(f"| `{f}` | {a} | {d} |")
    print()
    ci_time(tree, branch, span)
    print("## Test Plan\n")
    print("- pre-commit's hooks at vLLM's pinned versions on the tree after "
          "every commit (`make lint`)")
    for t in tests:
        print(f"- `pytest {t}`")
    print("- vLLM's registry, model and pooling tests that run offline, "
          "patched vs unpatched (`make vllm-tests`)\n"
          "- parity with sentence-transformers on a trained SPLADE checkpoint "
          "(>= 50 texts, fp32 and bf16), server and scale-out tests "
          "(`make test`)\n"
          "- speed and memory against upstream's SPLADE and "
          "sentence-transformers (`make bench`)\n")
    print("## Test Result\n")
    print("Figures for the whole series (this PR and those it depends on).\n")
    print("### Lint\n\n```\n" + section("build/lint.log", "lint run") + "```\n")
    print("### Tests\n\n```\n" + section("build/test-summary.txt", "test run") +
          "```\n")
    print("### vLLM's own tests\n\n" +
          section("build/vllm-tests-summary.md", "vllm-tests run"))
    # The index, then each kind of CPU's page (docs/performance/).
    pages = sorted((ROOT / "docs/performance").glob("*.md"))
    print("### Performance\n\n" + "\n".join(
        [section("docs/performance.md", "bench run")] +
        [section(str(p.relative_to(ROOT)), "bench run") for p in pages]))


if __name__ == "__main__":
    main()
