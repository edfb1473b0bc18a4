#!/usr/bin/env bash
# The test lanes, in order: our tests (tests/), then the series' vLLM tests
# and the registry subset of vLLM's own suite, from a copy of the patched
# tree's tests/ (from inside build/vllm the source vllm/, which has no
# compiled _C, would shadow the installed build).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1
export SPLADE_TINY="$PWD/build/models/splade-tiny"
export VLLM_TEST_SPLADE_MODEL="$SPLADE_TINY"
py="$PWD/.venv/bin/python"
pytest_args=(-p no:cacheprovider -q -rfEs --timeout=900 ${PYTEST_ARGS:-})

echo "== tests/ (ours)"
"$py" -m pytest "${pytest_args[@]}" tests

echo "== vLLM's tests/ from the patched tree: the series' tests + registry"
copy=build/vllm-tests
rm -rf "$copy"
mkdir -p "$copy"
cp -r build/vllm/tests "$copy/tests"
cp build/vllm/pyproject.toml "$copy/"
(
  cd "$copy"
  "$py" -m pytest "${pytest_args[@]}" tests/models/language/pooling/test_splade.py
  "$py" -m pytest "${pytest_args[@]}" tests/models/test_registry.py \
    -k "Bert or coverage or Splade"
)
