#!/usr/bin/env bash
# The longer fuzz run: the schemathesis lane of `make test`
# (tests/entrypoints/openai/test_splade_fuzz.py) with more examples per
# route, plus the hand-written abuse cases; reports in build/fuzz.
#   fuzz.sh   FUZZ_SEEDS (default 5 seeds) and FUZZ_EXAMPLES (examples per
#             route in each seed's fuzzing phase, default 600) pick the size
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1
export SPLADE_TINY="$PWD/build/models/splade-tiny"
# Stock vLLM (the unpatched CPU build of the pin) for the plain model's run.
SPLADE_STOCK_SITE=$(scripts/build-base-site.sh)
export SPLADE_STOCK_SITE
export SPLADE_FUZZ_EXAMPLES=${FUZZ_EXAMPLES:-600}
export SPLADE_FUZZ_SEEDS=${FUZZ_SEEDS:-1 2 3 4 5}
export SPLADE_FUZZ_REPORT="$PWD/build/fuzz"
rm -rf "$SPLADE_FUZZ_REPORT"
.venv/bin/python -m pytest -p no:cacheprovider -q -s -rfEs --timeout=7200 \
  tests/entrypoints/openai/test_splade_fuzz.py \
  tests/entrypoints/openai/test_splade_abuse.py
echo "fuzz: summary in $SPLADE_FUZZ_REPORT/summary.json"
