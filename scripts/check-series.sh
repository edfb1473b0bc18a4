#!/usr/bin/env bash
# For every prefix of the series: the patches apply in order on the base
# release, and every Python file touched so far byte-compiles. Works in a
# throwaway worktree (build/check), so build/vllm is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/series-env.sh
py=${PYTHON:-python3}
check=build/check
git -C "$tree" worktree remove --force "$PWD/$check" 2>/dev/null || rm -rf "$check"
git -C "$tree" worktree prune
git -C "$tree" worktree add --quiet --detach "$PWD/$check" base
trap 'git -C "$tree" worktree remove --force "$PWD/$check" 2>/dev/null || true' EXIT

mapfile -t patches < <(series_patches)
n=0
for p in "${patches[@]}"; do
  n=$((n + 1))
  if ! git -C "$check" am --quiet --keep-cr --keep-non-patch "$PWD/$p" \
      >/dev/null 2>build/check.log; then
    echo "check: [$n/${#patches[@]}] $p does not apply:" >&2
    sed 's/^/  /' build/check.log >&2
    exit 1
  fi
  mapfile -t files < <(git -C "$check" diff --name-only --diff-filter=d base HEAD -- '*.py')
  for f in "${files[@]}"; do
    if ! "$py" -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' \
        "$check/$f" 2>build/check.log; then
      echo "check: [$n/${#patches[@]}] after $p, $f does not compile:" >&2
      sed 's/^/  /' build/check.log >&2
      exit 1
    fi
  done
  echo "check: [$n/${#patches[@]}] $p applies; ${#files[@]} touched .py files compile"
done
