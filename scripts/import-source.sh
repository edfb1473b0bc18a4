#!/usr/bin/env bash
# Put the pinned vLLM release into build/vllm as a git repository whose
# first commit (tag "base") is the untouched release. Source: the PyPI sdist
# (sha256-verified), or `git clone` of the tag when VLLM_GIT_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
tree=build/vllm
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
  mkdir -p "$tree.tmp"
  echo "source: unpacking $VLLM_SDIST"
  tar -xzf "build/downloads/$VLLM_SDIST" -C "$tree.tmp" --strip-components=1
  (
    cd "$tree.tmp"
    export GIT_AUTHOR_NAME="vLLM release" GIT_AUTHOR_EMAIL="noreply@vllm.invalid"
    export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
    export GIT_AUTHOR_DATE="2026-10-18T00:00:00Z" GIT_COMMITTER_DATE="2026-10-18T00:00:00Z"
    git init --quiet -b main
    git add -A -f
    git commit --quiet -m "Import vLLM ${VLLM_VERSION} sdist" \
      -m "Base: $marker" -m "sdist sha256: $VLLM_SDIST_SHA256"
    git tag -a base -m "Base: $marker"
  )
fi
mv "$tree.tmp" "$tree"
echo "source: $tree is $marker ($(git -C "$tree" rev-parse --short base))"
