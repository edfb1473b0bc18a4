#!/usr/bin/env bash
# vLLM's own tests on the unpatched and the patched CPU build, side by side.
#   vllm-tests.sh         test_registry.py, the series' tests and the pooling
#                         tests below on both builds; a summary table, also
#                         in build/vllm-tests-summary.md; fails on a
#                         regression or an unexpected failure
#   vllm-tests.sh --fast  the series' tests + the registry's BERT/SPLADE
#                         subset, on .venv's patched build only (make test)
# Builds: the patched one is a copy of .venv's vllm (safe from another job
# reinstalling .venv meanwhile); the unpatched one is tag 'base' built like
# it (scripts/build-wheel.sh) and installed with --target. Each shadows
# .venv's vllm through PYTHONPATH; .venv gives the dependencies.
# Each build runs the tests/ of its own tree (git archive), outside
# build/vllm: from inside, the source vllm/ (no _C) would shadow the build.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONPATH
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1
export VLLM_TEST_SPLADE_MODEL="$PWD/build/models/splade-tiny"
py="$PWD/.venv/bin/python"
src=build/vllm
out=build/vllm-tests-run
P=tests/models/language/pooling

# The pooling tests whose hub models have seeded random stand-ins (see
# scripts/vllm-test-models.py). Left out: test_embedding's gemma2 and
# e5-mistral (sliding window: the CPU engine refuses them), gte-Qwen2,
# internlm2-reward and test_nomic_max_model_len.py (remote code from the
# hub), test_gritlm.py's other tests (expect the real weights' numbers),
# test_mm_classifier_conversion.py (8B/4B multimodal models and their
# processors), test_reward.py (skips itself on CPU).
pooling=(
  "$P/test_embedding.py::test_models[BAAI/bge-base-en-v1.5]"
  "$P/test_embedding.py::test_models[sentence-transformers/all-MiniLM-L12-v2]"
  "$P/test_embedding.py::test_models[intfloat/multilingual-e5-small]"
  "$P/test_embedding.py::test_models[sentence-transformers/stsb-roberta-base-v2]"
  "$P/test_embedding.py::test_models[ssmits/Qwen2-7B-Instruct-embed-base]"
  "$P/test_scoring.py" "$P/test_truncation_control.py"
  "$P/test_token_classification.py" "$P/test_classification.py"
  "$P/test_multilabel_classification_support.py"
  "$P/test_auto_prefix_cache_support.py::test_classify_models"
  "$P/test_auto_prefix_cache_support.py::test_embed_models"
  "$P/test_auto_prefix_cache_support.py::test_non_causal_models[half-intfloat/e5-small]"
  "$P/test_auto_prefix_cache_support.py::test_non_causal_models[half-papluca/xlm-roberta-base-language-detection]"
  "$P/test_pooler_config_init_behaviour.py::test_classify_models_using_activation"
  "$P/test_pooler_config_init_behaviour.py::test_embed_models_using_normalize"
  "$P/test_gritlm.py::test_find_array"
)

version() {  # version of the vllm found first with PYTHONPATH=$1
  PYTHONPATH=$1 "$py" -c 'import importlib.metadata as m; print(m.version("vllm"))'
}

# lane NAME TREE-ISH SITE PYTEST-ARGS...: the tests of TREE-ISH against the
# vllm in SITE (.venv's if empty); junit XML in $out/NAME.xml.
lane() {
  local name=$1 treeish=$2 site=$3 dir="$out/$1"; shift 3
  rm -rf "$dir" && mkdir -p "$dir"
  git -C "$src" archive "$treeish" tests pyproject.toml | tar -x -C "$dir"
  (
    cd "$dir"
    if [ -n "$site" ]; then export PYTHONPATH="$site"; fi
    "$py" -c 'import importlib.metadata as m, sys, vllm; v = m.version("vllm")
print(f"vllm {v} from {vllm.__file__}", file=sys.stderr); print(v)' \
      2>&1 >"../$name.version" | sed "s/^/== $name: /"
    local args=() a
    for a; do  # a test file absent from this tree: new in the series
      case $a in tests/*) [ -e "${a%%::*}" ] || continue ;; esac
      args+=("$a")
    done
    "$py" -m pytest -p no:cacheprovider -q -rfE --timeout=900 \
      --junitxml="../$name.xml" "${args[@]}" ${PYTEST_ARGS:-}
  )
}

# The tree .venv's patched build was made from (its version names it).
patched=$(version "")
tree=$(sed -n 's/.*+splade\.\([0-9a-f]\{8\}\)\.cpu$/\1/p' <<<"$patched")
if [ -z "$tree" ] || ! git -C "$src" cat-file -e "$tree^{tree}" 2>/dev/null; then
  echo "vllm-tests: .venv has vllm $patched, no tree of $src; make setup" >&2
  exit 1
fi

if [ "${1:-}" = --fast ]; then
  lane fast "$tree" "" $P/test_splade.py tests/models/test_registry.py \
    -k "Bert or coverage or Splade"
  exit
fi

psite="$PWD/build/vllm-patched-site"
rm -rf "$psite" && mkdir -p "$psite"
sp=(.venv/lib/python3*/site-packages)
cp -a "${sp[0]}/vllm" "${sp[0]}/vllm-$patched.dist-info" "$psite/"
if [ "$(version "$psite")" != "$patched" ] || [ "$(version "")" != "$patched" ]; then
  echo "vllm-tests: .venv's vllm changed while being copied; run again" >&2
  exit 1
fi

bsite="$PWD/build/vllm-base-site"
base="0.11.0+base.$(git -C "$src" rev-parse --short=8 'base^{tree}').cpu"
if [ "$(version "$bsite")" != "$base" ]; then
  wt="$PWD/build/vllm-base-tree"
  git -C "$src" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
  git -C "$src" worktree prune
  trap 'git -C "$src" worktree remove --force "$wt"' EXIT
  git -C "$src" worktree add --detach --quiet "$wt" base
  TREE="$wt" DIST=build/vllm-base-dist LABEL=base scripts/build-wheel.sh cpu
  git -C "$src" worktree remove --force "$wt" && trap - EXIT
  rm -rf "$bsite"
  build/tools/bin/uv pip install --quiet --python "$py" --no-deps \
    --compile-bytecode --target "$bsite" \
    "build/vllm-base-dist/vllm-$base-"*.whl
fi

# Stand-ins for the pooling tests' hub models, in a hub cache of their own.
export HF_HUB_CACHE="$PWD/$out-hub"
if [ ! -f "$HF_HUB_CACHE/.stamp" ] ||
   [ scripts/vllm-test-models.py -nt "$HF_HUB_CACHE/.stamp" ]; then
  rm -rf "$HF_HUB_CACHE"
  "$py" scripts/vllm-test-models.py "$HF_HUB_CACHE"
  touch "$HF_HUB_CACHE/.stamp"
fi

start=$SECONDS
selection=(tests/models/test_registry.py $P/test_splade.py "${pooling[@]}")
lane base base "$bsite" "${selection[@]}" ||
  echo "== base: pytest exit $? (compared below)"
lane patched "$tree" "$psite" "${selection[@]}" ||
  echo "== patched: pytest exit $? (compared below)"
echo "== vLLM's tests, unpatched vs patched ($((SECONDS - start)) s)"
if [ "$(cat $out/base.version)" != "$base" ] ||
   [ "$(cat $out/patched.version)" != "$patched" ]; then
  echo "vllm-tests: a lane did not run the build it should have" >&2
  exit 1
fi
"$py" scripts/vllm-tests-summary.py "$out/base.xml" "$out/patched.xml" \
  build/vllm-tests-summary.md
