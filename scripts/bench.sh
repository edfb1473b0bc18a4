#!/usr/bin/env bash
# Benchmark SPLADE in the patched vLLM CPU build against sentence-transformers
# and the floor (dense backbone + decoder GEMM); print the tables and write
# docs/performance.md. About 6-8 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
out=build/bench
log=$out/bench.log
mkdir -p "$out"
: >"$log"
# The engine runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0), so
# vLLM's default OpenMP thread pinning would pin the main thread to one core
# for everything measured after it (sentence-transformers, the GEMM floor):
# VLLM_CPU_OMP_THREADS_BIND=all leaves every run to the OS scheduler alike.
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
run bench.models
run bench.e2e tiny "$out/e2e-tiny.json" --texts 1000 --rounds 2
run bench.e2e base "$out/e2e-base.json" --texts 200
run bench.pooler "$out/pooler.json"
run bench.memory "$out/memory.json"
run bench.api "$out/api.json" --texts 1000
echo
run bench.report "$out" --started "$started" --load "$load"
