#!/usr/bin/env bash
# The four test lanes, run at once: our tests (tests/), the series' vLLM
# tests and the registry subset of vLLM's own suite on the patched build
# (scripts/vllm-tests.sh --fast), the plugin on stock vLLM (--plugin), and
# `make index` on a two-node Ray cluster (tests/index).
# A lane spends most of its time in single-threaded engine start-ups
# (imports, compilation) and waits: alone, the stock lane kept 0.55 of the
# 2 cores busy and the patched one 0.8, so together they take the time of
# the longest (measured: docs/testing.md). Each lane
# writes build/lanes/NAME.log, printed whole when it ends (and a line of
# progress every few minutes meanwhile); its closing pytest line goes to
# build/test-summary.txt (used by make pr), its wall time and engine
# starts (every vLLM process of the lane logs its engine cores to
# build/engine-starts/, scripts/engine-log.py) to build/timings.tsv; at
# the end scripts/time-report.py prints where this run's time went and the
# tests of all lanes in one closing line. LANES=ours,series,plugin,index picks
# lanes (all by default).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1
export SPLADE_TINY="$PWD/build/models/splade-tiny"
export VLLM_TEST_SPLADE_MODEL="$SPLADE_TINY"
export SPLADE_RUN=${SPLADE_RUN:-manual}
py="$PWD/.venv/bin/python"
# Stock vLLM (the unpatched CPU build of the pin), for the plugin's tests.
SPLADE_STOCK_SITE=$(scripts/timed.sh stock-site scripts/build-base-site.sh)
export SPLADE_STOCK_SITE
summary="$PWD/build/test-summary.txt"
: > "$summary"
rm -rf build/engine-starts build/lanes
mkdir -p build/lanes
finish() {
  local running
  running=$(jobs -p)
  [ -z "$running" ] || kill $running 2>/dev/null || true
  echo "== summary"
  cat "$summary"
  "$py" scripts/time-report.py "$SPLADE_RUN"
}
trap finish EXIT
lanes_start=$SECONDS

lane() {  # lane NAME CMD...: run CMD, keep its closing pytest line and time
  local name=$1 engines start=$SECONDS rc
  shift
  engines="build/engine-starts/$(slug "$name").log"
  echo "== $name"
  set +e
  VLLM_LOGGING_CONFIG_PATH=$("$py" scripts/engine-log.py config "$engines") "$@"
  rc=$?
  set -e
  printf '%s\t%s\t%d\t%d\n' "$SPLADE_RUN" "lane $name" $((SECONDS - start)) \
    "$("$py" scripts/engine-log.py count "$engines")" >> build/timings.tsv
  return "$rc"
}
slug() { tr -c 'a-zA-Z0-9\n' - <<<"$1"; }
pytest() {
  "$py" -m pytest -p no:cacheprovider -q -rfEs --timeout=900 ${PYTEST_ARGS:-} "$@"
}

declare -A names=() logs=()
start_lane() {  # start_lane KEY NAME CMD...: the lane in the background
  local key=$1 name=$2
  shift 2
  [[ ,${LANES:-ours,series,plugin,index}, == *,$key,* ]] || return 0
  logs[$key]="build/lanes/$(slug "$name").log"
  lane "$name" "$@" >"${logs[$key]}" 2>&1 &
  names[$!]=$key
}

# The tests the series carries into vLLM's tree (tests/test_series.py,
# CARRIED) run in the vLLM lanes, from the patched tree, in processes of
# their own: the /embed_sparse ones need vLLM's tests/utils.py, and the
# model ones start and fail engines of their own, which must not share a
# process with this lane's session engine.
start_lane ours "ours (tests/)" pytest tests --ignore=tests/entrypoints/pooling \
  --ignore=tests/models/language/pooling/test_splade.py \
  --ignore=tests/models/language/pooling/test_splade_sparse_pooler.py \
  --ignore=tests/models/language/pooling/test_distilbert.py \
  --ignore=tests/models/language/pooling/test_modernbert.py \
  --ignore=tests/models/language/pooling/test_splade_router.py \
  --ignore=tests/engine/test_encoder_only_chunked_prefill.py --ignore=tests/index
start_lane series "vLLM: the series' tests + registry" scripts/vllm-tests.sh --fast
start_lane plugin "vLLM: SPLADE on stock vLLM + the vllm-splade plugin" \
  scripts/vllm-tests.sh --plugin
# Its own lane: a Ray cluster and engine actors in processes of their own,
# off the longest lane's path (ours).
start_lane index "make index on Ray (tests/index)" pytest tests/index
echo "== ${#names[@]} lanes running at once: ${logs[*]}"

# Progress while they run: each running lane's last line, every 3 minutes.
(
  started=$SECONDS
  while sleep 180; do
    for log in "${logs[@]}"; do
      [ -f "$log.done" ] && continue
      echo "[$(( (SECONDS - started) / 60 )) min] $(basename "$log" .log):" \
        "$(tail -c 2000 "$log" | tr '\r' '\n' | grep -v '^$' | tail -n 1 | cut -c1-100)"
    done
  done
) &
ticker=$!

failed=()  # every lane runs to its end; the run fails if any did
while [ ${#names[@]} -gt 0 ]; do
  rc=0
  wait -n -p pid "${!names[@]}" || rc=$?
  key=${names[$pid]}
  unset "names[$pid]"
  touch "${logs[$key]}.done"
  cat "${logs[$key]}"
  name=$(sed -n '1s/^== //p' "${logs[$key]}")
  echo "$name: $(grep -E '^=* ?[0-9]+ (passed|failed)' "${logs[$key]}" | tail -n 1 |
    tr -d '=')" >> "$summary"
  [ "$rc" = 0 ] || failed+=("$key")
done
kill "$ticker" 2>/dev/null || true
printf '%s\t%s\t%d\n' "$SPLADE_RUN" "lanes, at once" $((SECONDS - lanes_start)) \
  >> build/timings.tsv
if [ ${#failed[@]} -gt 0 ]; then
  echo "run-tests: lanes failed: ${failed[*]}" >&2
  exit 1
fi
