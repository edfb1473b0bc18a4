#!/usr/bin/env python3
"""Download one release file of a PyPI project and verify its sha256.

Usage: fetch-from-pypi.py PROJECT FILENAME SHA256 DEST_DIR

The file is looked up by name in the index pip is configured with
(PIP_INDEX_URL, else pip's default), through the simple JSON API, so no
host is hard-coded here. A file already in DEST_DIR with the right hash is
reused; a wrong hash is an error, never silently replaced.
"""
import hashlib
import json
import os
import sys
import urllib.request


def index_url() -> str:
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        from pip._internal.models.index import PyPI
        url = PyPI.simple_url
    return url.rstrip("/")


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main() -> int:
    project, filename, want, dest = sys.argv[1:5]
    os.makedirs(dest, exist_ok=True)
    path = os.path.join(dest, filename)
    if os.path.exists(path):
        got = sha256_of(path)
        if got == want:
            print(f"fetch: {filename} already here, sha256 ok")
            return 0
        print(f"fetch: {path} has sha256 {got}, expected {want}.\n"
              f"       Delete it and run again.", file=sys.stderr)
        return 1
    req = urllib.request.Request(
        f"{index_url()}/{project}/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    match = [f for f in files if f["filename"] == filename]
    if not match:
        print(f"fetch: {filename} is not on the index for {project}",
              file=sys.stderr)
        return 1
    url = match[0]["url"]
    tmp = path + ".part"
    h = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=120) as r, open(tmp, "wb") as f:
        total = int(r.headers.get("Content-Length") or 0)
        done, shown = 0, -1
        for block in iter(lambda: r.read(1 << 20), b""):
            f.write(block)
            h.update(block)
            done += len(block)
            pct = done * 100 // total if total else 0
            if total and pct // 10 != shown:
                shown = pct // 10
                print(f"fetch: {filename} {done >> 20}/{total >> 20} MiB",
                      flush=True)
    if h.hexdigest() != want:
        os.unlink(tmp)
        print(f"fetch: {filename} downloaded with sha256 {h.hexdigest()}, "
              f"expected {want}: refusing it", file=sys.stderr)
        return 1
    os.replace(tmp, path)
    print(f"fetch: {filename} sha256 ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
