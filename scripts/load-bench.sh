#!/usr/bin/env bash
# Load and responsiveness of the served splade-tiny (bench/load.py): 32
# concurrent clients mixing good, bad, large, over-limit and abandoned
# requests for 60 s, with /health probed every 50 ms; write
# build/bench/load.json and print the table. The figures are reported, not
# asserted: the exit status is non-zero only when the benchmark breaks.
#   load-bench.sh [--seconds N] [--clients N] [--seed N] [--bulk-priority N]
#   (LOAD_OUT names the JSON instead of build/bench/load.json)
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONPATH  # .venv's patched build
# The engine runs as `vllm serve` runs it by default: its engine core in a
# process of its own, whatever the calling shell says.
unset VLLM_ENABLE_V1_MULTIPROCESSING
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 \
  TOKENIZERS_PARALLELISM=false
out=build/bench
mkdir -p "$out"
# The server's own log goes to /tmp/splade-server-PORT.log (named in the
# JSON); this process's stderr (transformers, sentence-transformers) to
# build/bench/load.log.
.venv/bin/python -m bench.load "${LOAD_OUT:-$out/load.json}" "$@" \
  2>"$out/load.log" || {
  rc=$?
  echo "load-bench: failed; the last lines of $out/load.log:" >&2
  tail -n 30 "$out/load.log" >&2
  exit "$rc"
}
