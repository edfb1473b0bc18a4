#!/usr/bin/env bash
# install-wheel.sh VENV: install the patched CPU wheel and the vllm-splade
# plugin from dist/ into VENV (their dependencies come from the venv's lock,
# so --no-deps). The plugin steps aside on the patched build; run on the
# unpatched one (PYTHONPATH=build/vllm-base-site), it serves SPLADE.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: install-wheel.sh VENV}
wheels=(dist/vllm-*+splade.*.cpu-*.whl)
if [ ! -f "${wheels[0]}" ] || [ ${#wheels[@]} != 1 ]; then
  echo "install-wheel: expected one CPU wheel in dist/, found: ${wheels[*]}" >&2
  exit 1
fi
echo "setup: installing ${wheels[0]} into $venv"
build/tools/bin/uv pip install --quiet --python "$venv/bin/python" --no-deps \
  --reinstall --compile-bytecode "${wheels[0]}"
plugins=(dist/vllm_splade-*.whl)
if [ ! -f "${plugins[0]}" ] || [ ${#plugins[@]} != 1 ]; then
  echo "install-wheel: expected one vllm-splade wheel in dist/, found: ${plugins[*]}" >&2
  exit 1
fi
build/tools/bin/uv pip install --quiet --python "$venv/bin/python" --no-deps \
  --reinstall --compile-bytecode "${plugins[0]}"
"$venv/bin/python" -c 'import importlib.metadata as m; print("setup: vllm", m.version("vllm"), "+ vllm-splade", m.version("vllm-splade"))'
