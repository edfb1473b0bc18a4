#!/usr/bin/env bash
# The vllm-splade plugin in dist/: plugin/ plus the series' SPLADE modules
# from the patched tree (scripts/vendor-series.py), as an sdist, and the
# wheel built from that sdist (what anyone building from PyPI's sdist
# gets), offline, with the tools venv's setuptools. Pure Python: one wheel
# for CPU and CUDA. Zip times come from SOURCE_DATE_EPOCH, not the clock:
# the same inputs give the same wheel, byte for byte.
# TOOLS_PYTHON (a Python with requirements/tools.txt) and DIST (the output
# folder) default to the tools venv and dist/; the tests build with
# Python 3.12 and 3.13 so.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${TREE:-build/vllm}
py=${TOOLS_PYTHON:-build/tools/bin/python}
dist=${DIST:-dist}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800}  # 1980-01-01, zip's first day
if [ -n "$(git -C "$tree" status --porcelain)" ]; then
  echo "build-plugin: $tree has uncommitted changes; commit them first" >&2
  exit 1
fi
stage=$(mktemp -d "${TMPDIR:-/tmp}/vllm-splade-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
"$py" scripts/vendor-series.py "$tree" "$stage/vllm-splade"
mkdir -p "$dist"
rm -f "$dist"/vllm_splade-*.whl "$dist"/vllm_splade-*.tar.gz
if ! "$py" -m build --quiet --sdist --no-isolation --outdir "$dist" \
    "$stage/vllm-splade" >"$stage/sdist.log" 2>&1; then
  cat "$stage/sdist.log" >&2
  exit 1
fi
"$py" -m pip wheel --quiet --no-deps --no-build-isolation --no-index \
  -w "$dist" "$dist"/vllm_splade-*.tar.gz
echo "build-plugin: $(ls "$dist"/vllm_splade-*.tar.gz "$dist"/vllm_splade-*.whl | paste -sd' ')"
