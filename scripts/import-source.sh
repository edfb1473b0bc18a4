#!/usr/bin/env bash
# Put the pinned vLLM release into build/vllm as a git repository whose
# first commit (tag "base") is the untouched release. Source: the PyPI sdist
# (sha256-verified), or `git clone` of the tag when VLLM_GIT_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
source scripts/series-env.sh  # tree=build/vllm, the committer of our tags
marker="vllm ${VLLM_VERSION} (${VLLM_TAG}, ${VLLM_COMMIT})"

if [ -e "$tree" ]; then
  if ! base_msg=$(git -C "$tree" tag -l --format='%(contents)' base 2>/dev/null) \
      || [ -z "$base_msg" ]; then
    echo "source: $tree exists but has no 'base' tag." >&2
    echo "        Move it away or delete it (rm -rf $tree) and run again." >&2
    exit 1
  fi
  if ! grep -qF "$marker" <<<"$base_msg"; then
    echo "source: $tree holds another vLLM than $marker:" >&2
    echo "        $(head -n1 <<<"$base_msg")" >&2
    echo "        Delete it (rm -rf $tree) and run again." >&2
    exit 1
  fi
  if [ -n "$(git -C "$tree" status --porcelain)" ]; then
    echo "source: $tree has uncommitted changes:" >&2
    git -C "$tree" status --short | head -n 20 >&2
    echo "        Commit them on the branch and run 'make refresh-patches'," >&2
    echo "        or drop them: git -C $tree reset --hard && git -C $tree clean -fd" >&2
    exit 1
  fi
  echo "source: $tree is $marker, clean"
  exit 0
fi

mkdir -p build
rm -rf "$tree.tmp"
if [ -n "${VLLM_GIT_URL:-}" ]; then
  git clone --quiet --depth 1 --branch "$VLLM_TAG" "$VLLM_GIT_URL" "$tree.tmp"
  got=$(git -C "$tree.tmp" rev-parse HEAD)
  if [ "${got#"$VLLM_COMMIT"}" = "$got" ]; then
    echo "source: $VLLM_GIT_URL $VLLM_TAG is $got, expected $VLLM_COMMIT" >&2
    rm -rf "$tree.tmp"
    exit 1
  fi
  git -C "$tree.tmp" tag -a base -m "Base: $marker"
else
  python3 scripts/fetch-from-pypi.py vllm "$VLLM_SDIST" "$VLLM_SDIST_SHA256" \
    build/downloads
  echo "source: importing $VLLM_SDIST"
  git init --quiet -b main "$tree.tmp"
  commit=$(scripts/import-sdist.sh "build/downloads/$VLLM_SDIST" "$tree.tmp/.git" "$marker")
  git -C "$tree.tmp" tag -a base -m "Base: $marker" "$commit"
  git -C "$tree.tmp" checkout --quiet -B main base
fi
mv "$tree.tmp" "$tree"
echo "source: $tree is $marker ($(git -C "$tree" rev-parse --short base))"
