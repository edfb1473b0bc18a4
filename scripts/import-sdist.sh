#!/usr/bin/env bash
# import-sdist.sh SDIST GIT_DIR MARKER: commit the tree of a vLLM sdist into
# the existing repository GIT_DIR (its .git) as a root commit, made
# reproducibly (fixed identity and date), and print its hash. The same sdist
# always gives the same commit, so `make source` and `make update-pin`
# agree on what the base release is. Touches no branch, tag or work tree.
set -euo pipefail
sdist=$1 git_dir=$2 marker=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$sdist" -C "$tmp" --strip-components=1
export GIT_DIR=$git_dir GIT_WORK_TREE=$tmp GIT_INDEX_FILE=$tmp.index
export GIT_AUTHOR_NAME="vLLM release" GIT_AUTHOR_EMAIL="noreply@vllm.invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2026-10-18T00:00:00Z" GIT_COMMITTER_DATE="2026-10-18T00:00:00Z"
rm -f "$GIT_INDEX_FILE"
git add -A -f
tree=$(git write-tree)
rm -f "$GIT_INDEX_FILE"
git commit-tree "$tree" -m "Import vLLM $(basename "$sdist" .tar.gz | sed 's/^vllm-//') sdist" \
  -m "Base: $marker" -m "sdist sha256: $(sha256sum "$sdist" | cut -d' ' -f1)"
