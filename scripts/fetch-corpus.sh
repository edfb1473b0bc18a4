#!/usr/bin/env bash
# Download the eval's corpus (eval-inputs.txt) into build/downloads and
# verify its sha256: Debian's package descriptions, one fixed release.
set -euo pipefail
cd "$(dirname "$0")/.."
source eval-inputs.txt
mirror=${DEBIAN_MIRROR:-$CORPUS_MIRROR}
dest=build/downloads/bookworm-$CORPUS_RELEASE-Translation-en.xz
if [ -f "$dest" ] && echo "$CORPUS_SHA256  $dest" | sha256sum -c --quiet; then
  echo "corpus: $dest is here, sha256 ok"
  exit 0
fi
mkdir -p build/downloads
curl -fsS --retry 3 --max-time 300 -o "$dest.part" "$mirror/$CORPUS_PATH"
if ! echo "$CORPUS_SHA256  $dest.part" | sha256sum -c --quiet; then
  rm -f "$dest.part"
  echo "corpus: $mirror/$CORPUS_PATH does not have sha256 $CORPUS_SHA256" \
    "(Debian $CORPUS_RELEASE's): refusing it. If bookworm has moved on," \
    "pin the new file's hash from its InRelease in eval-inputs.txt." >&2
  exit 1
fi
mv "$dest.part" "$dest"
echo "corpus: $dest <- $mirror/$CORPUS_PATH (Debian $CORPUS_RELEASE)"
