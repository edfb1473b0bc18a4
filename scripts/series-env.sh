# Shared settings for the series scripts (sourced, not run).
# Commits made from the series are reproducible: fixed committer, committer
# date = author date, so applying twice gives the same hashes.
tree=build/vllm
branch=${SERIES_BRANCH:-splade}
export GIT_COMMITTER_NAME="splade-for-vllm series"
export GIT_COMMITTER_EMAIL="series@splade-for-vllm.invalid"

series_patches() {
  # The patch files named in patches/series, in order.
  local p
  while IFS= read -r p || [ -n "$p" ]; do
    case "$p" in '' | \#*) continue ;; esac
    echo "patches/$p"
  done < patches/series
}

require_clean_tree() {
  if [ -n "$(git -C "$tree" status --porcelain)" ]; then
    echo "$1: $tree has uncommitted changes:" >&2
    git -C "$tree" status --short | head -n 20 >&2
    echo "  Commit them on '$branch' and run 'make refresh-patches'," >&2
    echo "  or drop them: git -C $tree reset --hard && git -C $tree clean -fd" >&2
    exit 1
  fi
}
