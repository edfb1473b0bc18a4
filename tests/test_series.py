# SPDX-License-Identifier: Apache-2.0
"""The stored patch series is consistent with itself and with our tests."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build/vllm"
# Test files that the series carries into vLLM's tests/, kept here as the
# one source of truth at the same relative path.
# The served one needs vLLM's tests/utils.py (RemoteOpenAIServer): it runs
# in the vLLM lane (scripts/vllm-tests.sh), not in ours. The vllm-splade
# plugin's /embed_sparse tests (tests/entrypoints/pooling/embed_sparse/) are
# not in the series: that lane adds them to the tree's tests.
CARRIED = [
    "tests/models/language/pooling/test_splade.py",
    "tests/models/language/pooling/test_splade_sparse_pooler.py",
    "tests/models/language/pooling/test_distilbert.py",
    "tests/models/language/pooling/test_modernbert.py",
    "tests/models/language/pooling/test_splade_router.py",
    "tests/entrypoints/pooling/embed/test_embed_route.py",
    "tests/engine/test_encoder_only_chunked_prefill.py",
]


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(TREE), *args],
                          check=True,
                          capture_output=True,
                          text=True).stdout


def series() -> list[str]:
    lines = (ROOT / "patches/series").read_text().splitlines()
    return [s for s in lines if s.strip() and not s.startswith("#")]


def test_series_names_every_patch_once():
    names = series()
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(
        p.name for p in (ROOT / "patches").glob("*.patch"))


def test_patches_have_vllm_style_subjects_and_no_signoff():
    for name in series():
        text = (ROOT / "patches" / name).read_text()
        subject = next(line for line in text.splitlines()
                       if line.startswith("Subject: "))
        assert subject.startswith("Subject: [PATCH] ["), subject
        assert "\nSigned-off-by:" not in text, name


def test_series_carries_our_vllm_tests_unchanged():
    for path in CARRIED:
        ours = (ROOT / path).read_text()
        theirs = git("show", f"HEAD:{path}")
        assert ours == theirs, (
            f"{path} differs from the copy the series carries: edit ours, "
            "copy it into build/vllm, amend the commit that adds it and run "
            "make refresh-patches")


def test_tree_is_the_series_applied():
    ids = lambda text: subprocess.run(  # noqa: E731
        ["git", "patch-id", "--stable"],
        input=text, check=True, capture_output=True,
        text=True).stdout.split()[::2]
    stored = "".join((ROOT / "patches" / n).read_text() for n in series())
    applied = git("format-patch", "--stdout", "base..HEAD")
    assert ids(applied) == ids(stored)
