#!/usr/bin/env bash
# .venv: the runtime of the pinned vLLM (CPU) and the test references, from the
# date-pinned lock requirements/runtime.lock, bytecode compiled (vLLM
# imports take twice as long without it here). ~4 GB of downloads cold.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=build/tools/bin/uv
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$uv" venv --quiet --python python3.11 .venv
fi
echo "setup: installing requirements/runtime.lock into .venv" \
  "($(grep -c '^[a-z]' requirements/runtime.lock) packages; torch and its CUDA libraries are ~3 GB)"
UV_HTTP_TIMEOUT=${UV_HTTP_TIMEOUT:-300} "$uv" pip install \
  --python .venv/bin/python --compile-bytecode -r requirements/runtime.lock
touch .venv/.stamp
