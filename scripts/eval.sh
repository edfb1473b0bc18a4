#!/usr/bin/env bash
# The hybrid-retrieval eval (docs/eval.md, code in hybrid/): serve splade-tiny
# and all-MiniLM-L6-v2 with the patched vLLM (`vllm serve`, compiled, fp32),
# index Debian's package descriptions into Milvus Lite, Seismic and bm25s,
# run the known-item queries end to end, check SPLADE's rankings against
# sentence-transformers', then measure SPLADE encoding on one engine, DP=2
# and two servers; write docs/eval.md and docs/eval.png.
#   EVAL_DOCS=10000 EVAL_QUERIES=1000 (EVAL_DOCS=0: every package with a
#   long description, ~64k)
#   EVAL_INDEX=build/index/out: the documents' SPLADE vectors from
#   `make index`'s output (same model folder), not through the server
#   eval.sh --smoke: 300 documents, 50 queries, no scale-out; the page goes
#   to build/eval/smoke/, docs/ is untouched
set -euo pipefail
cd "$(dirname "$0")/.."
docs=${EVAL_DOCS:-10000} queries=${EVAL_QUERIES:-1000} scale_docs=2000
out=build/eval page=docs/eval.md plot=docs/eval.png smoke=0 command="make eval"
if [ "${1:-}" = --smoke ]; then
  smoke=1 docs=300 queries=50 out=build/eval/smoke
  page=$out/eval.md plot=$out/eval.png command="scripts/eval.sh --smoke"
fi
py=.venv/bin/python vllm=.venv/bin/vllm
port=${EVAL_PORT:-8100}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 \
  VLLM_PLUGINS=vllm_splade,vllm_splade_embed_sparse \
  TOKENIZERS_PARALLELISM=false
mkdir -p "$out"
rm -f "$out"/scale.json "$out"/*.log
started=$(date +%s)
read -r sparse dense < <("$py" -m hybrid.models | tail -n 1)

pids=()
stop() {  # stop every server started here: SIGTERM, SIGKILL after 30 s
  local pid
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || :; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || continue 2; sleep 0.5; done
    kill -9 -- "-$pid" 2>/dev/null || :
  done
  pids=()
}
trap stop EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

serve() {  # serve LOG NAME PORT FOLDER [ARGS...]: `vllm serve` in the background
  local log=$out/$1.log name=$2 at=$3 folder=$4
  shift 4
  echo "eval: serving $folder as $name on port $at (log: $log)"
  setsid "$vllm" serve "$folder" --served-model-name "$name" --dtype float32 \
    --host 127.0.0.1 --port "$at" "$@" >"$log" 2>&1 &
  pids+=($!)
}

ready() {  # ready PORT...: wait until every server answers /health
  local at
  for at in "$@"; do
    for _ in $(seq 600); do
      curl -sf "http://127.0.0.1:$at/health" >/dev/null && continue 2
      for pid in "${pids[@]}"; do
        kill -0 "$pid" 2>/dev/null || {
          echo "eval: a server exited; see $out/*.log" >&2
          exit 1
        }
      done
      sleep 1
    done
    echo "eval: no server on port $at after 600 s; see $out/*.log" >&2
    exit 1
  done
}

# 1. The eval. vLLM's CPU backend binds each engine to the first core of
# the machine unless told: two servers on one machine are given a core each.
VLLM_CPU_OMP_THREADS_BIND=0 serve eval-splade splade-tiny "$port" "$sparse"
VLLM_CPU_OMP_THREADS_BIND=1 serve eval-dense all-MiniLM-L6-v2 $((port + 1)) "$dense"
ready "$port" $((port + 1))
"$py" -m hybrid.run "$out/results.json" --work "$out" \
  --sparse-url "http://127.0.0.1:$port" --sparse-model "$sparse" \
  --dense-url "http://127.0.0.1:$((port + 1))" --dense-model "$dense" \
  --docs "$docs" --queries "$queries" \
  ${EVAL_INDEX:+--sparse-index "$EVAL_INDEX"}
stop

# 2. SPLADE encoding as it scales out on this machine, same documents.
if [ "$smoke" = 0 ]; then
  scale() {  # scale LABEL LOG URL...
    "$py" -m hybrid.scale "$1" "$out/scale.json" "${@:3}" --docs "$scale_docs" \
      --log "$out/$2.log"
  }
  one=http://127.0.0.1:$port two=http://127.0.0.1:$((port + 1))
  serve scale-default splade-tiny "$port" "$sparse"
  ready "$port"
  scale "1 engine, vLLM's default binding" scale-default "$one"
  stop
  VLLM_CPU_OMP_THREADS_BIND=0-1 serve scale-both splade-tiny "$port" "$sparse"
  ready "$port"
  scale "1 engine bound to both cores" scale-both "$one"
  stop
  # vLLM 0.34's CPU backend gives each data-parallel rank a NUMA node of its
  # own and fails to start DP=2 on a one-node machine; its
  # VLLM_CPU_SIM_MULTI_NUMA knob lets the ranks share the node.
  VLLM_CPU_SIM_MULTI_NUMA=1 serve scale-dp2 splade-tiny "$port" "$sparse" \
    --data-parallel-size 2
  ready "$port"
  scale "--data-parallel-size 2" scale-dp2 "$one"
  stop
  VLLM_CPU_SIM_MULTI_NUMA=1 serve scale-dp2-api1 splade-tiny "$port" "$sparse" \
    --data-parallel-size 2 --api-server-count 1
  ready "$port"
  scale "--data-parallel-size 2 --api-server-count 1" scale-dp2-api1 "$one"
  stop
  VLLM_CPU_OMP_THREADS_BIND=0 serve scale-two-a splade-tiny "$port" "$sparse"
  VLLM_CPU_OMP_THREADS_BIND=1 serve scale-two-b splade-tiny $((port + 1)) "$sparse"
  ready "$port" $((port + 1))
  cat "$out/scale-two-b.log" >>"$out/scale-two-a.log"
  scale "2 servers, client round-robin" scale-two-a "$one" "$two"
  stop
fi

"$py" -m hybrid.report "$out" --started "$started" --doc "$page" \
  --plot "$plot" --command "$command"
