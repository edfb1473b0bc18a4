#!/usr/bin/env bash
# Benchmark SPLADE in the patched vLLM CPU build side by side with upstream's
# unpatched SPLADE of the same pin (tag 'base', built like vllm-tests.sh
# does), sentence-transformers and the floor (dense backbone + decoder GEMM),
# and the other families (DistilBERT SPLADE vs sentence-transformers, BGE-M3
# dense + sparse vs dense alone), and the masked-LM head's precision in
# bf16; print the tables and write this CPU's page under docs/performance/
# and the index docs/performance.md.
#   bench.sh          the full run (~30 min on 2 idle cores)
#   bench.sh --smoke  a few texts, one round, small pooler/memory cases, to
#                     check that every step runs; the page goes to
#                     build/bench/smoke/performance.md, docs/ is untouched
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
unset PYTHONPATH  # each vLLM run picks its build (bench/e2e.py, pooler.py)
py=.venv/bin/python
out=build/bench
doc=docs/performance.md
texts=1000 base_texts=200 rounds=2 pooler_rounds=3 quick=() corpus=200
if [ "${1:-}" = --smoke ]; then
  out=build/bench/smoke doc=build/bench/smoke/performance.md
  texts=40 base_texts=8 rounds=1 pooler_rounds=1 quick=(--quick) corpus=8
fi
log=$out/bench.log
mkdir -p "$out"
: >"$log"
# The engine runs in the measuring process (VLLM_ENABLE_V1_MULTIPROCESSING=0),
# so vLLM's default OpenMP thread pinning would pin its main thread to one
# core: VLLM_CPU_OMP_THREADS_BIND=all leaves every run to the OS scheduler
# alike.
# VLLM_PLUGINS empty: the vllm-splade plugin in .venv stays off, so the
# upstream runs are upstream's (its served runs enable it, tests.utils).
export VLLM_PLUGINS=
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_OMP_THREADS_BIND=all \
  VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_CONFIGURE_LOGGING=0 TOKENIZERS_PARALLELISM=false
started=$(date +%s)
load=$(cut -d' ' -f1-3 /proc/loadavg)
set -o errtrace  # the ERR trap fires inside run() too
trap 'echo "bench: failed; the last lines of $log:" >&2; tail -n 30 "$log" >&2' ERR

# Python's stderr (vLLM and transformers logs) goes to the log; the gloo
# banner each engine prints to stdout is dropped.
run() {
  echo "bench: $* (at ${SECONDS}s)" >>"$log"
  "$py" -m "$@" 2>>"$log" | { grep --line-buffered -v '^\[Gloo\]' || :; }
}

# The unpatched build of the same pin (scripts/build-base-site.sh).
bsite=$(scripts/build-base-site.sh 2>>"$log")

run bench.models
run bench.e2e tiny "$out/e2e-tiny.json" --texts "$texts" --rounds "$rounds" \
  --site "$bsite"
run bench.e2e base "$out/e2e-base.json" --texts "$base_texts" --rounds "$rounds" \
  --site "$bsite"
run bench.pooler "$out/pooler.json" --rounds "$pooler_rounds" --site "$bsite" \
  "${quick[@]}"
run bench.memory "$out/memory.json" "${quick[@]}"
run bench.api "$out/api.json" --texts "$texts"
run bench.defects "$out/defects.json" --site "$bsite"
run bench.families "$out/families.json" --texts "$texts" \
  --m3-texts "$base_texts" --rounds "$rounds"
run bench.routes "$out/routes.json" --queries "$texts" --site "$bsite" \
  --documents "$base_texts" --rounds "$rounds"
run bench.head_dtype "$out/head-dtype.json" --corpus "$corpus"
echo
run bench.report "$out" --started "$started" --load "$load" --doc "$doc"
