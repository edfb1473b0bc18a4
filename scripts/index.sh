#!/usr/bin/env bash
# `make index`: encode a corpus into Parquet shards of SPLADE vectors on
# Ray Data over vLLM engine actors (index/, docs/usage.md), as a user of the
# official wheel runs it: stock vLLM (the unpatched CPU build of the pin)
# with the vllm-splade plugin. By default the eval's corpus (every Debian
# package description) with splade-tiny into build/index/out, on a local
# Ray, in fp32: vLLM's default for an fp32 pooling checkpoint is fp16, which
# this CPU computes 7x slower (docs/scaling.md); INDEX_ARGS adds index.run's options (--address, --actors, --input,
# --model, --dtype...; `.venv/bin/python -m index.run --help`);
# INDEX_BUILD=patched runs the patched build of .venv instead of stock. A
# re-run finishes what is left.
set -euo pipefail
cd "$(dirname "$0")/.."
site=()
if [ "${INDEX_BUILD:-stock}" = stock ]; then
  site=(--vllm-site "$(scripts/build-base-site.sh)")
elif [ "$INDEX_BUILD" != patched ]; then
  echo "index: INDEX_BUILD is stock or patched, not $INDEX_BUILD" >&2
  exit 2
fi
.venv/bin/python -c 'from hybrid.models import ensure_splade; ensure_splade()' \
  >/dev/null
export HF_HUB_OFFLINE=1 VLLM_PLUGINS=${VLLM_PLUGINS:-vllm_splade} \
  VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} TOKENIZERS_PARALLELISM=false
# shellcheck disable=SC2086  # INDEX_ARGS is a list of options
exec .venv/bin/python -m index.run "${site[@]}" --dtype float32 ${INDEX_ARGS:-}
