#!/usr/bin/env bash
# Serve the trained splade-tiny checkpoint, saved as a sentence-transformers
# SparseEncoder folder, as a user does today: stock vLLM (the unpatched CPU
# build of the pin) with the vllm-splade plugin, no flags; print a request
# that shows its sparse vector.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8000}
model=build/models/splade-tiny-sparse-encoder
stock=$(scripts/build-base-site.sh)
.venv/bin/python -c 'from hybrid.models import ensure_splade; ensure_splade()' \
  >/dev/null
cat <<MSG
serve: starting stock vLLM + vllm-splade on 127.0.0.1:$port (ready in ~25 s;
serve: Ctrl-C stops it). Then, in another shell:

curl -s http://127.0.0.1:$port/embed_sparse -H 'Content-Type: application/json' \\
  -d '{"inputs": "what causes aging fast", "return_tokens": true}'

(or /v1/embeddings with {"model": "splade-tiny", "input": ...} for the full
30,522-float vector)

MSG
export PYTHONPATH=$stock VLLM_PLUGINS=vllm_splade,vllm_splade_embed_sparse HF_HUB_OFFLINE=1 \
  VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
exec .venv/bin/vllm serve "$model" --served-model-name splade-tiny \
  --dtype float32 --host 127.0.0.1 --port "$port"
