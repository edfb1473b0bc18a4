#!/usr/bin/env bash
# torch-cmake-without-cuda.sh TORCH_DIR OUT: a copy of torch's CMake package
# config (OUT/share/cmake/{Torch,Caffe2}) with its CUDA parts off, beside
# links to torch's lib/ and include/. PyPI's torch is a CUDA build: its own
# config stops with "uses CUDA but I cannot find the CUDA libraries" on a
# machine without the CUDA toolkit, though CPU code needs none of it.
set -euo pipefail
torch=${1:?usage: torch-cmake-without-cuda.sh TORCH_DIR OUT} out=${2:?}
rm -rf "$out"
mkdir -p "$out/share"
cp -a "$torch/share/cmake" "$out/share/cmake"
ln -s "$torch/lib" "$out/lib"
ln -s "$torch/include" "$out/include"
python3 - "$out/share/cmake" <<'PY'
import sys

d = sys.argv[1]


def edit(path: str, old: str, new: str) -> None:
    with open(path) as f:
        text = f.read()
    if text.count(old) != 1:
        sys.exit(f"torch-cmake-without-cuda: {path} changed; cannot find {old!r}")
    with open(path, "w") as f:
        f.write(text.replace(old, new))


caffe2 = f"{d}/Caffe2/Caffe2Config.cmake"
# The block that finds CUDA again (public/cuda.cmake), and the target the
# CUDA libraries' imported targets link to.
edit(caffe2, "if(1)\n  # The file public/cuda.cmake", "if(0)\n  # The file public/cuda.cmake")
edit(caffe2, "# import targets\n",
     "# import targets\nadd_library(torch::cudart INTERFACE IMPORTED)\n")
# TORCH_CUDA_LIBRARIES (nvrtc, c10_cuda) out of TORCH_LIBRARIES.
edit(f"{d}/Torch/TorchConfig.cmake", "if(1)\n  if(MSVC)", "if(0)\n  if(MSVC)")
PY
