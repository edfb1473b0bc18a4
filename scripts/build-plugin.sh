#!/usr/bin/env bash
# The vllm-splade plugin wheel in dist/: plugin/ plus the series' SPLADE
# modules from the patched tree (scripts/vendor-series.py), built with the
# tools venv's setuptools. Pure Python: one wheel for CPU and CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
tree=${TREE:-build/vllm}
stage=build/plugin-stage
py=build/tools/bin/python
if [ -n "$(git -C "$tree" status --porcelain)" ]; then
  echo "build-plugin: $tree has uncommitted changes; commit them first" >&2
  exit 1
fi
"$py" scripts/vendor-series.py "$tree" "$stage"
sed -i "s/@VLLM_VERSION@/$VLLM_VERSION/g" "$stage/README.md"
mkdir -p dist
rm -f dist/vllm_splade-*.whl
"$py" -m pip wheel --quiet --no-deps --no-build-isolation -w dist "$stage"
rm -rf "$stage/build" "$stage"/*.egg-info
echo "build-plugin: $(ls dist/vllm_splade-*.whl)"
