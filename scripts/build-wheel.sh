#!/usr/bin/env bash
# Build a wheel of the patched tree on top of a vLLM binary wheel of the same
# release: its compiled files and metadata, the patched tree's .py files, a
# local version label that names the patched tree.
#   build-wheel.sh cuda   -> dist/vllm-<version>+splade.<tree>-...whl
#                            (on the official CUDA wheel)
#   build-wheel.sh cpu    -> dist/vllm-<version>+splade.<tree>.cpu-...whl
#                            (on scripts/build-cpu-base.sh's wheel: PyPI's
#                            vllm-cpu, or one compiled here from the sdist,
#                            with the build-only cpu-build/runtime.patch
#                            applied on top of the tree's .py files)
# The CPU wheel is named vllm, with "cpu" in its version, which is how vLLM
# detects its CPU platform.
# Optional env overrides (scripts/vllm-tests.sh builds the unpatched wheel):
#   TREE=<git tree> (build/vllm), DIST=<out dir> (dist), LABEL=<name> (splade)
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
flavour=${1:?usage: build-wheel.sh cuda|cpu}
tree=${TREE:-build/vllm}
dist=${DIST:-dist}
name=${LABEL:-splade}
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=build/tools/bin/python

case "$flavour" in
  cuda) base=$VLLM_CUDA_WHEEL base_wheel=build/downloads/$base ;;
  cpu) base_wheel=$(scripts/build-cpu-base.sh); base=$(basename "$base_wheel") ;;
  *) echo "build-wheel: unknown flavour '$flavour' (cuda|cpu)" >&2; exit 2 ;;
esac

if [ -n "$(git -C "$tree" status --porcelain)" ]; then
  echo "build-wheel: $tree has uncommitted changes; commit them first" >&2
  exit 1
fi
label="$name.$(git -C "$tree" rev-parse --short=8 'HEAD^{tree}')"
[ "$flavour" = cpu ] && label="$label.cpu"
version="${VLLM_VERSION}+${label}"

out="$dist/vllm-${version}-${base#*-*-}"
# What else goes into the wheel than the tree: the binary wheel (its path
# names its build key) and, on the CPU, the build-only runtime patch.
inputs=$base_wheel
[ "$flavour" = cpu ] && inputs+=" $(sha256sum cpu-build/runtime.patch | cut -c1-12)"
if [ -f "$out" ] && [ "$(cat "$out.inputs" 2>/dev/null)" = "$inputs" ]; then
  echo "build-wheel: $out is up to date"
  exit 0
fi
if [ "$flavour" = cuda ]; then
  python3 scripts/fetch-from-pypi.py vllm "$base" "$VLLM_CUDA_WHEEL_SHA256" build/downloads
fi

work=build/wheel-$flavour${LABEL:+-$LABEL}
rm -rf "$work"
mkdir -p "$work" "$dist"
echo "build-wheel: unpacking $base"
"$py" -m wheel unpack -d "$work" "$base_wheel" >/dev/null
root=$(find "$work" -mindepth 1 -maxdepth 1 -type d)
old_info=$(find "$root" -maxdepth 1 -name '*.dist-info')

echo "build-wheel: taking the .py files of $tree ($(git -C "$tree" log -1 --format=%s))"
(cd "$tree" && git ls-files -z 'vllm/*.py') | while IFS= read -r -d '' f; do
  mkdir -p "$root/$(dirname "$f")"
  cp "$tree/$f" "$root/$f"
done

if [ "$flavour" = cpu ] && [ -z "${VLLM_CPU_WHEEL:-}" ]; then
  # The Python side of the build-only patch (cpu-build/README.md).
  patch -s -d "$root" -p1 < cpu-build/runtime.patch
fi

new_info="$root/vllm-${version}.dist-info"
mv "$old_info" "$new_info"
sed -i -e "s/^Name: .*/Name: vllm/" -e "s/^Version: .*/Version: ${version}/" \
  "$new_info/METADATA"
mv "$root" "$work/vllm-${version}"

suffix=; [ "$flavour" = cpu ] && suffix=.cpu
rm -f "$dist"/vllm-*+"$name".????????"$suffix"-*.whl{,.inputs}
echo "build-wheel: packing (takes a while for the CUDA wheel)"
"$py" -m wheel pack -d "$work" "$work/vllm-${version}"
# Keep the official file name's tags: the upload was renamed to manylinux
# while its WHEEL file still says linux_x86_64, and that file is kept as is.
mv "$work"/vllm-*.whl "$out"
echo "$inputs" > "$out.inputs"
rm -rf "$work"
echo "build-wheel: $out"
