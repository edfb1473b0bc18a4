#!/usr/bin/env bash
# Prepare the upstream PR: branch 'splade-pr' in build/vllm with one commit
# per patch, authored and signed off (DCO) by the person running this, and
# build/PR.md with the title, purpose, test plan and the results of the
# last lint / test / vllm-tests / bench runs. Pushes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/series-env.sh
source vllm-version.txt
pr_branch=splade-pr
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
git -C "$tree" checkout --quiet -B "$pr_branch" base
for p in "${patches[@]}"; do
  git -C "$tree" am --quiet --keep-cr --keep-non-patch "$PWD/$p"
  git -C "$tree" commit --quiet --amend --no-edit --reset-author --signoff
done
echo "pr: branch '$pr_branch': ${#patches[@]} commits signed off by $name <$email>"

python3 scripts/write-pr-md.py "$tree" "$pr_branch" > build/PR.md
echo "pr: wrote build/PR.md"
git -C "$tree" checkout --quiet "$branch"
grep -A3 '^## Size' build/PR.md | tail -n +2 | head -n 3 || true
cat <<MSG

Next steps (nothing was pushed):
  cd build/vllm
  git remote add fork git@github.com:<you>/vllm.git   # your fork of vllm-project/vllm
  git push fork $pr_branch
  gh pr create --repo vllm-project/vllm --base main --head <you>:$pr_branch \\
    --title "\$(head -n1 ../PR.md | sed 's/^# //')" --body-file ../PR.md
Upstream main has moved on since ${VLLM_TAG:-the pin}: rebase first (docs/upstreaming.md).
MSG
