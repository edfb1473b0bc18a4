#!/usr/bin/env python3
"""Write the PR description (to stdout) from the branch and the outputs of
the last runs: build/lint.log, build/test-summary.txt,
build/vllm-tests-summary.md and docs/performance.md. Nothing is typed in by
hand: a missing run says so."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 500  # vLLM asks for an RFC above this in the model files.
MODEL_FILES = ("vllm/model_executor/models/bert.py",
               "vllm/model_executor/models/registry.py")


def git(tree: str, *args: str) -> str:
    return subprocess.run(["git", "-C", tree, *args],
                          check=True,
                          capture_output=True,
                          text=True).stdout


def section(path: str, what: str) -> str:
    file = ROOT / path
    if not file.is_file():
        return f"(no {what} yet: run it, then `make pr` again)\n"
    return file.read_text().strip() + "\n"


def main() -> None:
    tree, branch = sys.argv[1:3]
    subjects = git(tree, "log", "--reverse", "--format=%s",
                   f"base..{branch}").splitlines()
    numstat = [
        line.split("\t")
        for line in git(tree, "diff", "--numstat", f"base..{branch}").split(
            "\n") if line
    ]
    model_lines = sum(
        int(a) + int(d) for a, d, f in numstat if f in MODEL_FILES)
    print("# [Model][Frontend] SPLADE sparse embeddings for BERT and "
          "RoBERTa, with a TEI-compatible /embed_sparse\n")
    print("## Purpose\n")
    print(
        "Serve SPLADE learned-sparse embedding models (naver/splade-v3, "
        "opensearch and granite sparse encoders, ...) with vLLM, numerically "
        "equal to sentence-transformers' SparseEncoder and TEI: the MLM head, "
        "log1p(relu(logits)) pooled over every token ([CLS]/[SEP] included), "
        "max or sum. Sentence-transformers SparseEncoder folders and plain "
        "BertForMaskedLM checkpoints load with no flags; /embed_sparse "
        "returns the non-zero terms in TEI's format.\n")
    print("Commits (one logical change each):\n")
    for s in subjects:
        print(f"- {s}")
    print("\n## Size\n")
    print(f"{len(numstat)} files, "
          f"+{sum(int(a) for a, _, _ in numstat)} "
          f"-{sum(int(d) for _, d, _ in numstat)} lines; "
          f"bert.py + registry.py: {model_lines} lines changed "
          f"({'under' if model_lines < LIMIT else 'OVER'} the {LIMIT}-line "
          "RFC threshold).\n")
    print("| file | + | - |\n|---|---|---|")
    for a, d, f in numstat:
        print(f"| `{f}` | {a} | {d} |")
    print("\n## Test Plan\n")
    print("- pre-commit's linters at vLLM's pinned versions on the tree after "
          "every commit (`make lint`)\n"
          "- `tests/models/language/pooling/test_splade.py` (new): the pooler "
          "against the formula on real pooling metadata incl. mixed-task "
          "batches; the model against sentence-transformers\n"
          "- vLLM's registry tests and the pooling tests that run offline, "
          "patched vs unpatched (`make vllm-tests`)\n"
          "- parity with sentence-transformers on a trained SPLADE checkpoint "
          "and synthetic BERT/RoBERTa/XLM-R ones, server, /embed_sparse, "
          "abuse and load tests (`make test`)\n"
          "- speed and memory against sentence-transformers (`make bench`)\n")
    print("## Test Result\n")
    print("### Lint\n\n```\n" + section("build/lint.log", "lint run") + "```\n")
    print("### Tests\n\n```\n" + section("build/test-summary.txt", "test run") +
          "```\n")
    print("### vLLM's own tests\n\n" +
          section("build/vllm-tests-summary.md", "vllm-tests run"))
    print("### Performance\n\n" +
          section("docs/performance.md", "bench run"))


if __name__ == "__main__":
    main()
