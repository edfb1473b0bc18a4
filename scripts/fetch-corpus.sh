#!/usr/bin/env bash
# Download the eval's corpus (eval-inputs.txt) into build/downloads and
# verify its sha256: Debian's package descriptions, one fixed release. The
# archive is the one this machine's apt uses (scripts/debian-archive.py
# reads its sources), or DEBIAN_MIRROR (a Debian archive's base address).
set -euo pipefail
cd "$(dirname "$0")/.."
source eval-inputs.txt
dest=build/downloads/$CORPUS_SUITE-$CORPUS_RELEASE-Translation-en.xz
if [ -f "$dest" ] && echo "$CORPUS_SHA256  $dest" | sha256sum -c --quiet; then
  echo "corpus: $dest is here, sha256 ok"
  exit 0
fi
mirror=${DEBIAN_MIRROR:-$(python3 scripts/debian-archive.py "$CORPUS_SUITE")}
mkdir -p build/downloads
curl -fsS --retry 3 --max-time 300 -o "$dest.part" "$mirror/dists/$CORPUS_SUITE/$CORPUS_PATH"
if ! echo "$CORPUS_SHA256  $dest.part" | sha256sum -c --quiet; then
  rm -f "$dest.part"
  echo "corpus: $mirror/dists/$CORPUS_SUITE/$CORPUS_PATH does not have sha256 $CORPUS_SHA256" \
    "(Debian $CORPUS_RELEASE's): refusing it. If bookworm has moved on," \
    "pin the new file's hash from its InRelease in eval-inputs.txt." >&2
  exit 1
fi
mv "$dest.part" "$dest"
echo "corpus: $dest <- $mirror/dists/$CORPUS_SUITE/$CORPUS_PATH (Debian $CORPUS_RELEASE)"
