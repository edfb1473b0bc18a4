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

curl -s http://127.0.0.1:$port/v1/embeddings -H 'Content-Type: application/json' \\
  -d '{"model": "splade-tiny", "input": "what causes aging fast"}' \\
  | python3 -c 'import json, sys; e = json.load(sys.stdin)["data"][0]["embedding"]; print({i: round(v, 4) for i, v in enumerate(e) if v})'

MSG
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
exec .venv/bin/vllm serve "$model" --served-model-name splade-tiny \
  --runner pooling --dtype float32 --enforce-eager \
  --host 127.0.0.1 --port "$port" \
  --hf-overrides '{"architectures": ["BertSpladeSparseEmbeddingModel"]}'
