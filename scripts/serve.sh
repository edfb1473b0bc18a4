#!/usr/bin/env bash
# Serve the trained splade-tiny checkpoint with the patched CPU build on
# loopback, and print a request that shows its sparse vector.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${PORT:-8000}
model=build/models/splade-tiny
cat <<MSG
serve: starting vLLM on 127.0.0.1:$port (ready in ~25 s; Ctrl-C stops it).
serve: then, in another shell:

curl -s http://127.0.0.1:$port/embed_sparse -H 'Content-Type: application/json' \\
  -d '{"inputs": "what causes aging fast", "return_tokens": true}'

(or /v1/embeddings with {"model": "splade-tiny", "input": ...} for the full
30,522-float vector)

MSG
# splade-tiny is a plain BertForMaskedLM folder, which vLLM serves as
# per-token masked-LM logits unless told it is SPLADE (a sentence-transformers
# SparseEncoder folder would need no flag).
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
exec .venv/bin/vllm serve "$model" --served-model-name splade-tiny \
  --runner pooling --dtype float32 --enforce-eager \
  --hf-overrides '{"architectures": ["BertSpladeSparseEmbeddingModel"]}' \
  --host 127.0.0.1 --port "$port"
