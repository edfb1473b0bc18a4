#!/usr/bin/env python3
"""Compare two runs of vLLM's tests (pytest junit XML), per test file.

Usage: vllm-tests-summary.py BASE.xml PATCHED.xml OUT.md

BASE.xml/PATCHED.xml sit next to BASE.version/PATCHED.version (written by
scripts/vllm-tests.sh). Prints a markdown table (also written to OUT.md)
and exits 1 on a regression (passed unpatched, fails patched), on any
patched failure that is neither a known one nor failing unpatched too, or
on a test function of the unpatched build that the patched one lacks.
"""
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

# Failures of the unpatched release on this CPU machine with the stand-ins
# of scripts/vllm-test-models.py, and why.
_REAL_TOKENIZER = ("checks the token ids / token counts of the real "
                   "250k-word XLM-R tokenizer (ids up to 133888); the "
                   "stand-in's small offline tokenizer gives others")
KNOWN = {
    r"embed/test_offline\.py::test_(str_prompts|token_ids_prompts|"
    r"list_prompts)$": _REAL_TOKENIZER,
    r"embed/test_online\.py::test_(basic|completion_request|"
    r"completion_request_batched|truncate_prompt_tokens|chat_request)\[":
    _REAL_TOKENIZER,
    r"scoring/test_bi_encoder_offline\.py::"
    r"test_token_limits_with_mistral_tokenizer$":
    ("loads mistralai/Mistral-7B-Instruct-v0.3's tokenizer from the hub, "
     "which this machine cannot reach offline"),
    r"test_registry\.py::test_registry_imports\[(Col)?UltraVBert":
    ("UltraVBert's modules import torchvision, which the vLLM CI venv "
     "leaves out (requirements/vllm-runtime.in)"),
}
OUTCOMES = ("passed", "failed", "skipped", "error")
BAD = ("failed", "error")


def seconds(xml: Path) -> str:
    return f"{float(next(ET.parse(xml).iter('testsuite')).get('time')):.0f} s"


def read(xml: Path) -> dict[str, str]:
    """Test id (file::name) -> outcome; the worst entry wins."""
    rank = {o: i for i, o in enumerate(("passed", "skipped", "failed",
                                        "error"))}
    out: dict[str, str] = {}
    for case in ET.parse(xml).iter("testcase"):
        parts = case.get("classname", "").split(".")
        i = max(i for i, p in enumerate(parts) if p.startswith("test_"))
        tid = "::".join(["/".join(parts[:i + 1]) + ".py", *parts[i + 1:],
                         case.get("name", "")])
        tags = {child.tag for child in case}
        outcome = ("error" if "error" in tags else "failed" if "failure"
                   in tags else "skipped" if "skipped" in tags else "passed")
        if rank[outcome] >= rank.get(out.get(tid, "passed"), 0):
            out[tid] = outcome
    return out


def counts(results: dict[str, str], path: str) -> str:
    c = Counter(o for t, o in results.items() if t.startswith(path + "::"))
    if not c:
        return "new (absent)"
    return " / ".join(str(c[o]) for o in OUTCOMES)


def known(tid: str) -> str:
    return next((why for pat, why in KNOWN.items() if re.search(pat, tid)),
                "")


def main() -> int:
    base_xml, patched_xml, out_md = map(Path, sys.argv[1:4])
    base, patched = read(base_xml), read(patched_xml)
    names = [x.with_suffix(".version").read_text().strip()
             for x in (base_xml, patched_xml)]
    files = sorted({t.split("::")[0] for t in {**base, **patched}})
    lines = [
        "| test file | unpatched | patched |",
        "|---|---|---|",
        f"| (vllm build) | {names[0]} | {names[1]} |",
        f"| (pytest time) | {seconds(base_xml)} | {seconds(patched_xml)} |",
    ]
    lines += [f"| {f} | {counts(base, f)} | {counts(patched, f)} |"
              for f in files]
    total = [" / ".join(str(Counter(r.values())[o]) for o in OUTCOMES)
             for r in (base, patched)]
    lines.append(f"| **total** | {total[0]} | {total[1]} |")
    lines.insert(
        0, "vLLM's own tests on the unpatched and the patched CPU build "
        "(scripts/vllm-tests.sh). The pooling tests run on seeded random "
        "stand-ins for their hub models (scripts/vllm-test-models.py). "
        "Counts are passed / failed / skipped / error.\n")

    regressions = sorted(t for t, o in patched.items()
                         if o in BAD and base.get(t) == "passed")
    expected = sorted(t for t, o in patched.items()
                      if o in BAD and known(t) and base.get(t) in BAD)
    unexpected = sorted(t for t, o in patched.items() if o in BAD
                        and t not in regressions and t not in expected)
    fixed = sorted(t for t, o in base.items()
                   if o in BAD and patched.get(t) == "passed")
    # A test the series re-parametrized runs under other ids: only a test
    # function that no longer runs at all counts as gone.
    run = {t.split("[")[0] for t in patched}
    gone = sorted(t for t in base
                  if t not in patched and t.split("[")[0] not in run)
    reparam = sorted(t for t in base
                     if t not in patched and t.split("[")[0] in run)
    lines.append("")
    lines.append("Known failures (fail on both builds, expected):" +
                 ("" if expected else " none"))
    lines += [f"- `{t}`: {known(t)}" for t in expected]
    lines.append("Unexpected failures on the patched build: " +
                 (", ".join(f"`{t}`" for t in unexpected) or "none"))
    if fixed:
        lines.append("Fail unpatched, pass patched: " +
                     ", ".join(f"`{t}`" for t in fixed))
    if reparam:
        lines.append("Re-parametrized by the series (the same test runs "
                     "with other parameters): " +
                     ", ".join(f"`{t}`" for t in reparam))
    if gone:
        lines.append("Not run on the patched build: " +
                     ", ".join(f"`{t}`" for t in gone))
    lines.append("**Regressions** (passed unpatched, fail patched): " +
                 (", ".join(f"`{t}`" for t in regressions) or "none"))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out_md.write_text(text)
    return 1 if regressions or unexpected or gone else 0


if __name__ == "__main__":
    sys.exit(main())
