#!/usr/bin/env bash
# Regenerate patches/*.patch and patches/series from branch $SERIES_BRANCH
# (default: splade) of build/vllm. This is how patches are edited: commit
# (or rebase) on the branch, then refresh. The output is stable: no version
# footer, no commit hashes, no "n/m" numbering.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/series-env.sh
require_clean_tree refresh-patches
count=$(git -C "$tree" rev-list --count "base..$branch")
if [ "$count" = 0 ]; then
  echo "refresh-patches: '$branch' has no commits on top of base" >&2
  exit 1
fi
if git -C "$tree" log --format=%B "base..$branch" | grep -q '^Signed-off-by:'; then
  echo "refresh-patches: a commit on '$branch' has a Signed-off-by line;" >&2
  echo "  the stored series carries none (make pr adds the submitter's)." >&2
  exit 1
fi
rm -f patches/*.patch
git -C "$tree" format-patch --quiet --no-signature --zero-commit \
  --no-numbered --full-index -o "$PWD/patches" "base..$branch"
(cd patches && ls -1 -- *.patch) > patches/series
echo "refresh-patches: $count patches from '$branch':"
sed 's/^/  /' patches/series
