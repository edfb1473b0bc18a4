#!/usr/bin/env bash
# vLLM's own tests on the unpatched and the patched CPU build, side by side.
#   vllm-tests.sh         the registry tests (all but the per-architecture
#                         imports of untouched models), the SPLADE tests
#                         (tests/models/language/pooling/test_splade*.py:
#                         upstream's and the series') and the pooling tests
#                         below on both builds; a summary table, also in
#                         build/vllm-tests-summary.md; fails on a regression
#                         or an unexpected failure
#   vllm-tests.sh --fast  the SPLADE tests + the registry's BERT/SPLADE
#                         subset, on the venv's patched build only (make test)
#   vllm-tests.sh --plugin  the series' SPLADE family tests on the unpatched
#                         build with the vllm-splade plugin, what only stock
#                         can break (make test; STOCK_FULL=1: the patched
#                         lane's whole matrix on stock too)
# Environment: .venv-vllm-ci, vLLM CI's versions (requirements/vllm-ci.in:
# sentence-transformers, transformers, pytest... as the pin's
# requirements/test/cpu.txt pins them).
# Builds: the patched one is a copy of that venv's vllm (safe from another
# job reinstalling it meanwhile); the unpatched one is tag 'base' built like
# it (scripts/build-wheel.sh) and installed with --target. Each shadows the
# venv's vllm through PYTHONPATH; the venv gives the dependencies.
# Each build runs the tests/ of its own tree (git archive), outside
# build/vllm: from inside, the source vllm/ (no _C) would shadow the build.
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
unset PYTHONPATH
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# VLLM_ENABLE_V1_MULTIPROCESSING is on (vLLM's default) in both lanes, also
# when make test's lane of our tests turned it off: with the engine core in
# the pytest process, vLLM's conftest tears the distributed state down after
# each test under a module-scoped engine ("pipeline model parallel group is
# not initialized" from the next test: test_truncation_control.py, the
# entrypoints' offline tests, test_splade.py).
export VLLM_ENABLE_V1_MULTIPROCESSING=1 VLLM_CPU_KVCACHE_SPACE=1
# The OpenAI server tests start `vllm serve`; the lane's PYTHONPATH decides
# which build it runs.
venv=$PWD/.venv-vllm-ci
export PATH="$venv/bin:$PATH"
export VLLM_TEST_SPLADE_MODEL="$PWD/build/models/splade-tiny"
export VLLM_TEST_EMBED_MODEL="$PWD/build/models/all-MiniLM-L6-v2"
py="$venv/bin/python"
src=build/vllm
out=build/vllm-tests-run
P=tests/models/language/pooling

# Registry tests of the touched architectures (BERT, DistilBERT, ModernBERT,
# RoBERTa/XLM-R, BGE-M3, SPLADE; -k is case-insensitive and substring, so
# ColBERT... come along) and test_hf_registry_coverage. Not the whole file:
# vLLM's conftest runs gc.collect() after every test (~1-2 s here), and the
# model-property tests inspect each architecture in a fresh `python -m
# vllm.model_executor.models.registry` (~20 s each on 2 busy cores), so the
# ~430 tests would take far over 15 min.
registry_k="not test_registry.py or bert or roberta or splade or bge or coverage"
# The SPLADE tests: upstream's test_splade_sparse_pooler.py and the series'
# own (test_distilbert.py, test_modernbert.py: the masked-LM models the
# series adds SPLADE to); expanded in each lane's tree, where a file the
# tree lacks is left out.
splade="$P/test_splade*.py $P/test_distilbert.py $P/test_modernbert.py"

# The pooling tests that cover the touched code (BERT, RoBERTa/XLM-R models,
# pooling, the offline and OpenAI pooling entrypoints) and run on the CPU
# build, on seeded random stand-ins for their hub models (see
# scripts/vllm-test-models.py). Left out: decoder-only and multimodal models
# (untouched code; several need 7B weights, remote code or sliding-window
# attention, which the CPU engine refuses); tests that skip themselves on
# CPU or need the real weights' numbers (mteb, reward, ColBERT projections);
# and, for time (2 cores, an engine start costs 10-30 s), the duplicates of
# the same paths through other models (test_classify_models_using_activation,
# basic/test_truncation.py), token_embed/test_offline.py (token ids and
# token counts of the real 250k-word XLM-R tokenizer) and the
# *_model_runner_v2 tests ("Model Runner V2 requires Triton": not on CPU).
E=tests/entrypoints/pooling
pooling=(
  "$P/test_embedding.py::test_models[BAAI/bge-base-en-v1.5]"
  "$P/test_embedding.py::test_models[sentence-transformers/all-MiniLM-L12-v2]"
  "$P/test_embedding.py::test_models[vllm-project/multilingual-e5-small]"
  "$P/test_embedding.py::test_models[sentence-transformers/stsb-roberta-base-v2]"
  "$P/test_token_classification.py::test_bert_for_masked_lm"
  "$P/test_token_classification.py::test_xlm_roberta_models"
  "$P/test_truncation_control.py"
  "$P/test_multilabel_classification_support.py"
  "$P/test_pooler_config_init_behaviour.py::test_embed_models_using_normalize"
  "$E/embed/test_offline.py" "$E/basic/test_encode.py"
  "$E/scoring/test_bi_encoder_offline.py" "$E/embed/test_protocol.py"
  "$E/test_utils.py" "$E/test_factories.py" "$E/embed/test_online.py"
  "$E/embed/test_embed_route.py" tests/test_pooling_params.py
)

version() {  # version of the vllm found first with PYTHONPATH=$1
  PYTHONPATH=$1 "$py" -c 'import importlib.metadata as m; print(m.version("vllm"))'
}

# lane NAME TREE-ISH SITE PYTEST-ARGS...: the tests of TREE-ISH against the
# vllm in SITE (the venv's if empty); junit XML in $out/NAME.xml.
lane() {
  local name=$1 treeish=$2 site=$3 dir="$out/$1"; shift 3
  rm -rf "$dir" && mkdir -p "$dir"
  git -C "$src" archive "$treeish" tests pyproject.toml | tar -x -C "$dir"
  if [ -n "${VLLM_PLUGINS:-}" ]; then
    # The vllm-splade plugin's tests of its /embed_sparse, in vLLM's layout.
    cp -r tests/entrypoints/pooling/embed_sparse "$dir/tests/entrypoints/pooling/"
  fi
  (
    cd "$dir"
    if [ -n "$site" ]; then export PYTHONPATH="$site"; fi
    "$py" -c 'import importlib.metadata as m, sys, vllm; v = m.version("vllm")
print(f"vllm {v} from {vllm.__file__}", file=sys.stderr); print(v)' \
      2>&1 >"../$name.version" | sed "s/^/== $name: /"
    local args=() a f
    for a; do  # files absent from this tree (new in the series) are left out
      case $a in
        tests/*::*) [ -e "${a%%::*}" ] && args+=("$a") ;;
        tests/*\**)  # a glob (test_splade*.py): the files of this tree
          for f in $a; do [ -e "$f" ] && args+=("$f"); done ;;
        tests/*) [ -e "$a" ] && args+=("$a") ;;
        *) args+=("$a") ;;
      esac
    done
    "$py" -m pytest -p no:cacheprovider -q -rfE --timeout=900 \
      --junitxml="../$name.xml" "${args[@]}" ${PYTEST_ARGS:-}
  )
}

# The tree the venv's patched build was made from (its version names it).
patched=$(version "")
tree=$(sed -n 's/.*+splade\.\([0-9a-f]\{8\}\)\.cpu$/\1/p' <<<"$patched")
if [ -z "$tree" ] || ! git -C "$src" cat-file -e "$tree^{tree}" 2>/dev/null; then
  echo "vllm-tests: $venv has vllm $patched, no tree of $src; make setup" >&2
  exit 1
fi

# The venv has the vllm-splade plugin (scripts/install-wheel.sh). vLLM loads
# every general plugin unless VLLM_PLUGINS names some: the lanes that compare
# the builds name none (an empty list), the plugin's lanes name it.
export VLLM_PLUGINS=
S=tests/entrypoints/pooling/embed_sparse
if [ "${1:-}" = --plugin ]; then
  # What only stock vLLM (the unpatched build) with the vllm-splade plugin
  # the venv has (scripts/install-wheel.sh) can break, not the patched
  # lane's matrix again: loading and config reading (SparseEncoder folders
  # with no flags, a plain masked-LM folder kept as one, the load-time
  # errors), one parity with sentence-transformers per family (BERT,
  # RoBERTa/XLM-R, DistilBERT, ModernBERT; the plugin's DistilBERT
  # masked-LM and dense models, which stock lacks), and its /embed_sparse,
  # all of it, Router folders included (with the flags stock vLLM needs).
  # Left to the patched lane, which runs the same shipped modules: the
  # trained checkpoint's parity (stock + the plugin serves it in make
  # test's first lane), the second config layout of a family, RoBERTa by
  # --hf-overrides, BGE-M3's dense output (stock's own model); not the
  # masked-LM models of the series' modernbert.py, which the plugin does
  # not ship, nor its unit tests of modules stock vLLM lacks.
  # STOCK_FULL=1: the patched lane's matrix on stock too.
  only_stock="and not test_offline_dense_embed_is_unchanged and not pretrained \
and not RobertaForMaskedLM-overrides0 and not max-log1p_relu-5.x \
and not (test_distilbert and 5.x)"
  [ "${STOCK_FULL:-0}" = 1 ] && only_stock=""
  bsite=$(PYTHON_FOR_SITE="$py" scripts/build-base-site.sh)
  export VLLM_PLUGINS=vllm_splade,vllm_splade_embed_sparse
  lane plugin "$tree" "$bsite" "$P/test_splade.py" "$P/test_distilbert.py" \
    "$P/test_modernbert.py" "$S" \
    -k "not (test_modernbert and test_masked_lm_logits_match_transformers) $only_stock"
  version=$(cat "$out/plugin.version")
  if [ "$version" != "$(version "$bsite")" ]; then
    echo "vllm-tests: the plugin lane ran vllm $version, not stock" >&2
    exit 1
  fi
  exit
fi

if [ "${1:-}" = --fast ]; then
  # UltraVBert's registry entries import torchvision, left out of the venv
  # (requirements/vllm-runtime.in): they fail unpatched too.
  # The plugin's /embed_sparse on the patched build: what the series
  # changes under it (a Router's route, in-tree here; BGE-M3's dense output
  # beside its sparse one) and its unit tests; the route's protocol itself
  # is the stock lane's (and make test's first lane serves it on this build).
  export VLLM_PLUGINS=vllm_splade,vllm_splade_embed_sparse
  lane fast "$tree" "" "$splade" tests/models/test_registry.py \
    "$S/test_embed_sparse_plugin.py" "$S/test_embed_sparse_router.py" \
    "$S/test_bge_m3.py::test_offline_dense_embed_is_unchanged[bge-m3]" \
    "$S/test_bge_m3.py::test_rows_of_token_ids" \
    tests/entrypoints/pooling/embed/test_embed_route.py tests/test_pooling_params.py \
    tests/engine/test_encoder_only_chunked_prefill.py \
    -k "(bert or bge or coverage or splade or embed_sparse or embed_route) and not UltraVBert"
  exit
fi

psite="$PWD/build/vllm-patched-site"
rm -rf "$psite" && mkdir -p "$psite"
sp=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -a "$sp/vllm" "$sp/vllm-$patched.dist-info" "$psite/"
if [ "$(version "$psite")" != "$patched" ] || [ "$(version "")" != "$patched" ]; then
  echo "vllm-tests: the venv's vllm changed while being copied; run again" >&2
  exit 1
fi

bsite=$(PYTHON_FOR_SITE="$py" scripts/build-base-site.sh)
base=$(version "$bsite")

# Stand-ins for the pooling tests' hub models, in a hub cache of their own.
export HF_HUB_CACHE="$PWD/$out-hub"
if [ ! -f "$HF_HUB_CACHE/.stamp" ] ||
   [ scripts/vllm-test-models.py -nt "$HF_HUB_CACHE/.stamp" ]; then
  rm -rf "$HF_HUB_CACHE"
  "$py" scripts/vllm-test-models.py "$HF_HUB_CACHE"
  touch "$HF_HUB_CACHE/.stamp"
fi

start=$SECONDS
selection=(tests/models/test_registry.py "$splade" "${pooling[@]}"
           -k "$registry_k")
# pytest exit 1 (some tests failed) is compared below; 2-5 (interrupted,
# internal or usage error, nothing collected: a test id gone from the tree)
# mean the lane did not run, and an empty comparison must not pass.
for name in base patched; do
  [ $name = base ] && args=(base "$bsite") || args=("$tree" "$psite")
  rc=0
  lane $name "${args[@]}" "${selection[@]}" || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "vllm-tests: the $name lane did not run (pytest exit $rc); see above" >&2
    exit 1
  fi
  [ "$rc" = 0 ] || echo "== $name: pytest exit $rc (compared below)"
done
echo "== vLLM's tests, unpatched vs patched ($((SECONDS - start)) s)"
if [ "$(cat $out/base.version)" != "$base" ] ||
   [ "$(cat $out/patched.version)" != "$patched" ]; then
  echo "vllm-tests: a lane did not run the build it should have" >&2
  exit 1
fi
"$py" scripts/vllm-tests-summary.py "$out/base.xml" "$out/patched.xml" \
  build/vllm-tests-summary.md
