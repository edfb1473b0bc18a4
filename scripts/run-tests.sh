#!/usr/bin/env bash
# The test lanes, in order: our tests (tests/), then the series' vLLM tests
# and the registry subset of vLLM's own suite (scripts/vllm-tests.sh
# --fast). Each lane's closing pytest line goes to build/test-summary.txt
# (used by make pr).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1
export SPLADE_TINY="$PWD/build/models/splade-tiny"
export VLLM_TEST_SPLADE_MODEL="$SPLADE_TINY"
py="$PWD/.venv/bin/python"
summary="$PWD/build/test-summary.txt"
: > "$summary"

lane() {  # lane NAME PYTEST-ARGS...: run pytest, keep its closing line
  local name=$1 log
  shift
  log=$(mktemp)
  echo "== $name"
  set +e
  "$py" -m pytest -p no:cacheprovider -q -rfEs --timeout=900 ${PYTEST_ARGS:-} \
    "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  set -e
  echo "$name: $(grep -E '^=* ?[0-9]+ (passed|failed)' "$log" | tail -n 1 | tr -d '=')" \
    >> "$summary"
  rm -f "$log"
  return "$rc"
}

# tests/entrypoints/pooling/ holds a test the series carries into vLLM's
# tree that needs vLLM's own tests/utils.py: the vLLM lane runs it.
lane "ours (tests/)" tests --ignore=tests/entrypoints/pooling
log=$(mktemp)
echo "== vLLM: the series' tests + registry (Bert, coverage, Splade)"
set +e
scripts/vllm-tests.sh --fast 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
echo "vLLM: the series' tests + registry: $(grep -E '^=* ?[0-9]+ (passed|failed)' "$log" | tail -n 1 | tr -d '=')" >> "$summary"
rm -f "$log"
[ "$rc" = 0 ]
echo "== summary"
cat "$summary"
