#!/usr/bin/env bash
# The unpatched CPU build of the pin ("stock vLLM": tag 'base' of
# build/vllm, built like the patched one by scripts/build-wheel.sh),
# installed with --target in build/vllm-base-site; reused while its
# version still names the base tree. Prints the site's path.
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
src=build/vllm
py=${PYTHON_FOR_SITE:-.venv/bin/python}
bsite="$PWD/build/vllm-base-site"
base="$VLLM_VERSION+base.$(git -C "$src" rev-parse --short=8 'base^{tree}').cpu"
have=$(PYTHONPATH=$bsite "$py" -c \
  'import importlib.metadata as m; print(m.version("vllm"))' 2>/dev/null || :)
if [ "$have" != "$base" ]; then
  echo "build-base-site: building the unpatched vLLM $base" >&2
  wt="$PWD/build/vllm-base-tree"
  git -C "$src" worktree remove --force "$wt" 2>/dev/null || rm -rf "$wt"
  git -C "$src" worktree prune
  trap 'git -C "$src" worktree remove --force "$wt"' EXIT
  git -C "$src" worktree add --detach --quiet "$wt" base
  TREE="$wt" DIST=build/vllm-base-dist LABEL=base scripts/build-wheel.sh cpu >&2
  git -C "$src" worktree remove --force "$wt" && trap - EXIT
  rm -rf "$bsite"
  build/tools/bin/uv pip install --quiet --python "$py" --no-deps \
    --compile-bytecode --target "$bsite" \
    "build/vllm-base-dist/vllm-$base-"*.whl >&2
fi
echo "$bsite"
