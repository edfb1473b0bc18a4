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
# Stock vLLM (the unpatched CPU build of the pin), for the plugin's tests.
SPLADE_STOCK_SITE=$(scripts/build-base-site.sh)
export SPLADE_STOCK_SITE
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

# The tests the series carries into vLLM's tree (tests/test_series.py,
# CARRIED) run in the vLLM lane, from the patched tree, in a process of
# their own: the /embed_sparse one needs vLLM's tests/utils.py, and the
# model ones start and fail engines of their own, which must not share a
# process with this lane's session engine.
lane "ours (tests/)" tests --ignore=tests/entrypoints/pooling \
  --ignore=tests/models/language/pooling/test_splade.py \
  --ignore=tests/models/language/pooling/test_splade_sparse_pooler.py \
  --ignore=tests/models/language/pooling/test_distilbert.py \
  --ignore=tests/models/language/pooling/test_modernbert.py \
  --ignore=tests/models/language/pooling/test_splade_router.py
vllm_lane() {  # vllm_lane TITLE ARG: a lane of scripts/vllm-tests.sh ARG
  local title=$1 log rc
  log=$(mktemp)
  echo "== vLLM: $title"
  set +e
  scripts/vllm-tests.sh "$2" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  echo "vLLM: $title: $(grep -E '^=* ?[0-9]+ (passed|failed)' "$log" | tail -n 1 | tr -d '=')" >> "$summary"
  rm -f "$log"
  return "$rc"
}
vllm_lane "the series' tests + registry" --fast
vllm_lane "SPLADE on stock vLLM + the vllm-splade plugin" --plugin
echo "== summary"
cat "$summary"
