#!/usr/bin/env bash
# update-pin.sh VERSION: move the series to vLLM VERSION in one command.
#  1. build/vllm holds the current pin with the series applied (make apply);
#  2. the release files of VERSION are fetched and hashed (write-pin.py) and
#     its sdist is imported into build/vllm beside the current base;
#  3. every patch is replayed onto it in order: a resolution recorded for it
#     in pin-resolutions/VERSION/ if there is one ("recorded resolution"),
#     else `git am` if it applies as is ("applied"), else `git am -3` on the
#     preimage blobs ("merged"), else the run stops for you ("conflict");
#  4. on success: tag 'base' and branch 'splade' move to VERSION,
#     vllm-version.txt is rewritten, patches/ regenerated, then check + lint.
# The per-patch report is printed and kept in build/update-pin/report.md.
# Stopped at a conflict: resolve it in build/vllm (fix whatever else the
# patch needs on VERSION too), `git add` the files, `git -C build/vllm am
# --continue`, then run this again: it first records every patch on branch
# update-pin that differs from the series' (pin-resolutions/VERSION/, to be
# committed), then starts over and replays them (docs/updating-the-pin.md).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: update-pin.sh VERSION (e.g. 0.34.0)}
source scripts/series-env.sh
source vllm-version.txt
from=$VLLM_VERSION
if [ "$from" = "$version" ]; then
  echo "update-pin: the pin is already vLLM $version" >&2
  exit 1
fi
work=build/update-pin
mkdir -p "$work"
report=$work/report.md
pin=$work/vllm-version.txt

mapfile -t patches < <(series_patches)
pid() { git patch-id --stable | cut -c1-12; }
resolutions=pin-resolutions/$version
mkdir -p "$resolutions"
# recorded N: the resolution recorded for patch N of the series, if any.
recorded() { ls "$resolutions/$(printf %04d "$1")-$(pid <"${patches[$1 - 1]}").patch" 2>/dev/null; }

# The previous run stopped at patch N, which was then resolved and committed
# on branch update-pin: record it.
if [ -d "$tree/.git/rebase-apply" ]; then
  git -C "$tree" am --abort
fi
if [ -f "$work/stopped" ]; then
  n=$(cat "$work/stopped")
  if [ "$(git -C "$tree" rev-list --count update-pin 2>/dev/null)" = $((n + 1)) ]; then
    out=$resolutions/$(printf %04d "$n")-$(pid <"${patches[$n - 1]}").patch
    git -C "$tree" format-patch -1 --stdout --no-signature --zero-commit \
      --full-index update-pin > "$out"
    echo "update-pin: recorded your resolution of patch $n: $out"
  fi
  rm -f "$work/stopped"
fi

echo "== update-pin: the series on vLLM $from (make apply)"
scripts/import-source.sh
scripts/apply-series.sh

echo "== update-pin: vLLM $version from the package index"
python3 scripts/write-pin.py "$version" "$pin"
(
  source "$pin"
  marker="vllm ${VLLM_VERSION} (${VLLM_TAG}, ${VLLM_COMMIT})"
  scripts/import-sdist.sh "build/downloads/$VLLM_SDIST" "$tree/.git" "$marker" \
    > "$work/base"
  echo "$marker" > "$work/marker"
)
new_base=$(cat "$work/base")

{
  echo "# Moving the series from vLLM $from to vLLM $version"
  echo
  echo "| # | patch | result |"
  echo "|---|---|---|"
} > "$report"
row() { echo "| $1 | \`$(basename "$2")\` | $3 |" | tee -a "$report" | sed 's/^/  /'; }

git -C "$tree" checkout --quiet -B update-pin "$new_base"
n=0
for p in "${patches[@]}"; do
  n=$((n + 1))
  am=(git -C "$tree" am --quiet --keep-cr --keep-non-patch --committer-date-is-author-date)
  if rec=$(recorded "$n"); then
    if ! "${am[@]}" "$PWD/$rec" >"$work/am.log" 2>&1; then
      row "$n" "$p" "**recorded resolution does not apply** (\`$rec\`)"
      cat "$work/am.log" >&2
      echo "update-pin: delete $rec and run again to resolve patch $n anew" >&2
      exit 1
    fi
    row "$n" "$p" "conflict, resolved by the recorded resolution (\`$(basename "$rec")\`)"
  elif git -C "$tree" apply --check "$PWD/$p" 2>/dev/null; then
    "${am[@]}" "$PWD/$p"
    row "$n" "$p" applied
  elif "${am[@]}" -3 "$PWD/$p" >"$work/am.log" 2>&1; then
    row "$n" "$p" "merged (3-way)"
  else
    echo "$n" > "$work/stopped"
    row "$n" "$p" "**conflict: stopped** ($(git -C "$tree" status --short | grep -E '^(DD|AU|UD|UA|DU|AA|UU) ' | cut -c4- | paste -sd' '))"
    cat >&2 <<MSG

update-pin: patch $n ($p) conflicts with vLLM $version in:
$(git -C "$tree" status --short | grep -E '^(DD|AU|UD|UA|DU|AA|UU) ' | sed 's/^/  /')
Resolve it in $tree (branch update-pin), then:
  git -C $tree add <files> && git -C $tree am --continue
and run 'make update-pin VERSION=$version' again: it records your resolution
in $resolutions/ and starts over. vllm-version.txt and patches/ are
unchanged until every patch is on vLLM $version.
MSG
    exit 1
  fi
done

# Every patch is on the new release: make it the series.
git -C "$tree" tag -f -a "base-$from" -m "Base of the series before vLLM $version" "base^{}" >/dev/null
git -C "$tree" tag -f -a base -m "Base: $(cat "$work/marker")" "$new_base" >/dev/null
git -C "$tree" checkout --quiet -B "$branch" update-pin
git -C "$tree" branch --quiet -D update-pin
cp "$pin" vllm-version.txt
# The plugin's releases for a vLLM series are <series>.N: a new series
# starts at N = 0, a new pin in the same series ships as N + 1 (its
# modules are the moved series'; vendor-series.py refuses a stage whose
# series is not the pin's).
series=$(cut -d. -f1,2 <<<"$version")
plugin_version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' plugin/vllm_splade/__init__.py)
if [ "$(cut -d. -f1,2 <<<"$plugin_version")" = "$series" ]; then
  next="$series.$(( $(cut -d. -f3 <<<"$plugin_version") + 1 ))"
else
  next="$series.0"
fi
sed -i "s/^__version__ = \".*\"$/__version__ = \"$next\"/" \
  plugin/vllm_splade/__init__.py
cp "$report" "$resolutions/report.md"
scripts/refresh-patches.sh >/dev/null
echo "== update-pin: vLLM $from -> $version, per patch:"
sed -n '5,$p' "$report"
echo "== update-pin: make check"
scripts/check-series.sh
echo "== update-pin: make lint"
make --no-print-directory lint
echo "update-pin: done. The report is in $report; what is left by hand is in"
echo "  docs/updating-the-pin.md (the lock, lint tool versions, then make test)."
