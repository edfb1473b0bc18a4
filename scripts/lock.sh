#!/usr/bin/env bash
# Re-lock requirements/runtime.lock (.venv: our tests),
# requirements/cpu-build.lock (build/cpu-build-env: compiling the CPU build)
# and requirements/vllm-ci.lock (.venv-vllm-ci: the vLLM lane, constrained to
# the versions of the pin's requirements/test/cpu.txt). Dates are pinned: the
# release date, and a later one for the references of our own tests.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=build/tools/bin/uv
release=2026-11-17T00:00:00Z  # vLLM 0.34.0 was published 2026-11-16
compile() {
  "$uv" pip compile --quiet --no-header --python-version 3.11 \
    --python-platform x86_64-manylinux_2_28 --exclude-newer "$release" "$@"
}
compile requirements/runtime.in \
  --exclude-newer-package sentence-transformers=2026-11-30T00:00:00Z \
  -o requirements/runtime.lock
compile requirements/cpu-build.in -o requirements/cpu-build.lock
# A client application's environment, as of the day its test was written.
"$uv" pip compile --quiet --no-header --python-version 3.11 \
  --python-platform x86_64-manylinux_2_28 --exclude-newer 2026-12-06T00:00:00Z \
  requirements/haystack.in -o requirements/haystack.lock
python3 scripts/ci-constraints.py build/vllm build/vllm-ci-constraints.txt
compile requirements/vllm-ci.in -c build/vllm-ci-constraints.txt \
  -o requirements/vllm-ci.lock
echo "lock: requirements/runtime.lock ($(grep -c '^[a-z]' requirements/runtime.lock) packages)," \
  "requirements/cpu-build.lock ($(grep -c '^[a-z]' requirements/cpu-build.lock) packages)," \
  "requirements/vllm-ci.lock ($(grep -c '^[a-z]' requirements/vllm-ci.lock) packages)"
