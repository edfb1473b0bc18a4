#!/usr/bin/env bash
# `make build-wheel FULL=1`: compile the patched tree from source, CUDA
# kernels included. Needs nvcc (CUDA 13.0), a CUDA build of torch 2.13.0 and
# vLLM's requirements/build.txt in the Python given by $PYTHON (default
# python3); takes an hour or more. CI does not run it.
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
py=${PYTHON:-python3}
if ! command -v nvcc >/dev/null; then
  echo "build-wheel FULL=1: nvcc not found; it needs the CUDA toolkit." >&2
  echo "  Without CUDA, 'make build-wheel' reuses the official binaries." >&2
  exit 1
fi
"$py" -c 'import torch, sys; sys.exit(torch.version.cuda is None)' || {
  echo "build-wheel FULL=1: $py has no CUDA build of torch" >&2; exit 1; }
label="splade.$(git -C build/vllm rev-parse --short=8 'HEAD^{tree}')"
mkdir -p dist
SETUPTOOLS_SCM_PRETEND_VERSION="${VLLM_VERSION}+${label}" \
VLLM_TARGET_DEVICE=cuda \
  "$py" -m pip wheel --no-build-isolation --no-deps -w dist build/vllm
