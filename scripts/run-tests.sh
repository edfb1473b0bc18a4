#!/usr/bin/env bash
# The test lanes, in order: our tests (tests/), then the series' vLLM tests
# and the registry subset of vLLM's own suite (scripts/vllm-tests.sh
# --fast), then the plugin on stock vLLM (--plugin). Each lane's closing
# pytest line goes to build/test-summary.txt (used by make pr); its wall
# time and engine starts (every vLLM process of the lane logs its engine
# cores to build/engine-starts/, scripts/engine-log.py) to
# build/timings.tsv; at the end, scripts/time-report.py prints where this
# run's time went and the tests of all lanes in one closing line.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1
export SPLADE_TINY="$PWD/build/models/splade-tiny"
export VLLM_TEST_SPLADE_MODEL="$SPLADE_TINY"
export SPLADE_RUN=${SPLADE_RUN:-manual}
py="$PWD/.venv/bin/python"
# Stock vLLM (the unpatched CPU build of the pin), for the plugin's tests.
SPLADE_STOCK_SITE=$(scripts/build-base-site.sh)
export SPLADE_STOCK_SITE
summary="$PWD/build/test-summary.txt"
: > "$summary"
rm -rf build/engine-starts
trap 'echo "== summary"; cat "$summary"; "$py" scripts/time-report.py "$SPLADE_RUN"' EXIT

lane() {  # lane NAME CMD...: run CMD, keep its closing pytest line and time
  local name=$1 log engines start=$SECONDS rc
  shift
  log=$(mktemp)
  engines="build/engine-starts/$(tr -c 'a-zA-Z0-9\n' - <<<"$name").log"
  echo "== $name"
  set +e
  VLLM_LOGGING_CONFIG_PATH=$("$py" scripts/engine-log.py config "$engines") \
    "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  echo "$name: $(grep -E '^=* ?[0-9]+ (passed|failed)' "$log" | tail -n 1 | tr -d '=')" \
    >> "$summary"
  printf '%s\t%s\t%d\t%d\n' "$SPLADE_RUN" "lane $name" $((SECONDS - start)) \
    "$("$py" scripts/engine-log.py count "$engines")" >> build/timings.tsv
  rm -f "$log"
  return "$rc"
}
pytest() {
  "$py" -m pytest -p no:cacheprovider -q -rfEs --timeout=900 ${PYTEST_ARGS:-} "$@"
}

# The tests the series carries into vLLM's tree (tests/test_series.py,
# CARRIED) run in the vLLM lane, from the patched tree, in a process of
# their own: the /embed_sparse one needs vLLM's tests/utils.py, and the
# model ones start and fail engines of their own, which must not share a
# process with this lane's session engine.
failed=()  # every lane runs; the run fails if any did
lane "ours (tests/)" pytest tests --ignore=tests/entrypoints/pooling \
  --ignore=tests/models/language/pooling/test_splade.py \
  --ignore=tests/models/language/pooling/test_splade_sparse_pooler.py \
  --ignore=tests/models/language/pooling/test_distilbert.py \
  --ignore=tests/models/language/pooling/test_modernbert.py \
  --ignore=tests/models/language/pooling/test_splade_router.py ||
  failed+=(ours)
lane "vLLM: the series' tests + registry" scripts/vllm-tests.sh --fast ||
  failed+=(series)
lane "vLLM: SPLADE on stock vLLM + the vllm-splade plugin" \
  scripts/vllm-tests.sh --plugin || failed+=(plugin)
if [ ${#failed[@]} -gt 0 ]; then
  echo "run-tests: lanes failed: ${failed[*]}" >&2
  exit 1
fi
