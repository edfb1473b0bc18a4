#!/usr/bin/env bash
# Reset branch $SERIES_BRANCH (default: splade) of build/vllm to the base
# release and `git am` every patch of patches/series onto it, in order.
# Running it twice gives the same commits. It refuses to discard commits on
# the branch that patches/ does not hold (FORCE=1 discards them).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/series-env.sh
require_clean_tree apply

mapfile -t patches < <(series_patches)
if git -C "$tree" rev-parse -q --verify "refs/heads/$branch" >/dev/null \
   && [ "${FORCE:-0}" != 1 ]; then
  ids() { git patch-id --stable | awk '{print $1}'; }
  on_branch=$(git -C "$tree" format-patch --stdout "base..$branch" | ids)
  in_series=$(cat "${patches[@]}" /dev/null | ids)
  if [ "$on_branch" != "$in_series" ]; then
    echo "apply: branch '$branch' of $tree differs from patches/." >&2
    echo "  Keep its commits: make refresh-patches (then commit patches/)." >&2
    echo "  Discard them:     make apply FORCE=1" >&2
    exit 1
  fi
fi

git -C "$tree" checkout --quiet -B "$branch" base
n=0
for p in "${patches[@]}"; do
  if ! git -C "$tree" am --quiet --keep-cr --keep-non-patch --committer-date-is-author-date \
      "$PWD/$p" >/dev/null 2>build/apply.log; then
    git -C "$tree" am --abort || true
    echo "apply: FAILED at $p (patch $((n + 1)) of ${#patches[@]}):" >&2
    sed 's/^/  /' build/apply.log >&2
    echo "  $tree is left clean on '$branch' with the $n patches before it." >&2
    echo "  To fix: git -C $tree am -3 $PWD/$p, resolve, git am --continue," >&2
    echo "  then apply the rest and run make refresh-patches." >&2
    exit 1
  fi
  n=$((n + 1))
done
echo "apply: $n patches on '$branch' ($(git -C "$tree" rev-parse --short HEAD))"
