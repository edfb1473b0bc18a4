#!/usr/bin/env bash
# setup-venv.sh VENV LOCK: a venv with the packages of LOCK (the pinned vLLM
# CPU build's runtime and test references; the vllm wheel itself comes from
# dist/, scripts/install-wheel.sh), bytecode compiled (vLLM imports take
# twice as long without it here). ~4 GB of downloads cold, for torch and its
# CUDA libraries; a second venv takes them from uv's cache.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: setup-venv.sh VENV LOCK} lock=${2:?usage: setup-venv.sh VENV LOCK}
uv=build/tools/bin/uv
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$uv" venv --quiet --python python3.11 "$venv"
fi
echo "setup: installing $lock into $venv ($(grep -c '^[a-z]' "$lock") packages)"
UV_HTTP_TIMEOUT=${UV_HTTP_TIMEOUT:-300} "$uv" pip install --quiet \
  --python "$venv/bin/python" --compile-bytecode -r "$lock"
touch "$venv/.stamp"
