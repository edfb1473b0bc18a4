#!/usr/bin/env bash
# Prepare the upstream PRs listed in patches/prs: for each, branch
# 'splade-pr/NAME' in build/vllm (base + every patch up to the PR's last,
# one commit each, authored and signed off (DCO) by the person running
# this) and build/pr/NAME.md with the title, the patches it holds, what it
# depends on, its purpose, size, test plan and the results of the last
# lint / test / vllm-tests / bench runs. Pushes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/series-env.sh
source vllm-version.txt
name=$(git -C "$tree" config user.name || true)
email=$(git -C "$tree" config user.email || true)
if [ -z "$name" ] || [ -z "$email" ]; then
  echo "pr: set your git identity first; the commits are signed off with it:" >&2
  echo "  git config --global user.name 'Your Name'" >&2
  echo "  git config --global user.email you@example.com" >&2
  exit 1
fi
require_clean_tree pr
unset GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL  # Yours, not the series'.

mapfile -t patches < <(series_patches)
signed=pr-signed
git -C "$tree" branch --quiet -D splade-pr 2>/dev/null || true  # v1 name; blocks splade-pr/*
git -C "$tree" checkout --quiet -B "$signed" base
for p in "${patches[@]}"; do
  git -C "$tree" am --quiet --keep-cr --keep-non-patch "$PWD/$p"
  git -C "$tree" commit --quiet --amend --no-edit --reset-author --signoff
done
mkdir -p build/pr
rm -f build/pr/*.md
first=1 deps=()
while read -r pr last title; do
  case "$pr" in '' | \#*) continue ;; esac
  if [ "$last" -lt "$first" ] || [ "$last" -gt "${#patches[@]}" ]; then
    echo "pr: patches/prs: $pr ends at patch $last, outside $first..${#patches[@]}" >&2
    exit 1
  fi
  # The PR's tip: the signed branch minus the patches after it.
  git -C "$tree" branch --quiet -f "splade-pr/$pr" "$signed~$(( ${#patches[@]} - last ))"
  python3 scripts/write-pr-md.py "$tree" "splade-pr/$pr" "$first" "$last" \
    "$title" "${deps[*]:-}" > "build/pr/$pr.md"
  echo "pr: splade-pr/$pr: patches $first-$last${deps[*]:+, on top of ${deps[*]}} -> build/pr/$pr.md"
  deps+=("$pr") first=$(( last + 1 ))
done < patches/prs
if [ "$first" -le "${#patches[@]}" ]; then
  echo "pr: patches/prs leaves patches $first-${#patches[@]} in no PR" >&2
  exit 1
fi
git -C "$tree" checkout --quiet "$branch"
git -C "$tree" branch --quiet -D "$signed"
cat <<MSG

Next steps (nothing was pushed), for each PR in order, once the one before
it is merged (or stacked on it):
  cd build/vllm
  git remote add fork git@github.com:<you>/vllm.git   # your fork of vllm-project/vllm
  git push fork splade-pr/NAME
  gh pr create --repo vllm-project/vllm --base main --head <you>:splade-pr/NAME \\
    --title "\$(head -n1 ../pr/NAME.md | sed 's/^# //')" --body-file ../pr/NAME.md
Upstream main has moved on since ${VLLM_TAG:-the pin}: rebase first (docs/upstreaming.md).
MSG
