#!/usr/bin/env python3
"""Constraints from vLLM's CI lock: the pinned versions of the pin's
requirements/test/cpu.txt (vLLM's CPU test environment), without hashes and
without the packages our CPU build takes elsewhere (torch and its CUDA-less
+cpu builds, which PyPI does not serve; triton-cpu, from GitHub; torchvision,
torchaudio and torchcodec, left out as in vllm-runtime.in; setuptools,
which vLLM's cpu.txt pins to another version than its CI lock does;
certifi, whose locked 2026.10.19 PyPI has only as 2026.10.19.post1).

Usage: ci-constraints.py VLLM_TREE OUT
"""
import re
import sys

SKIP = {"torch", "torchvision", "torchaudio", "torchcodec", "triton", "setuptools", "certifi"}


def main() -> int:
    tree, out = sys.argv[1:3]
    pins = []
    with open(f"{tree}/requirements/test/cpu.txt") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s\\;]+)", line)
            if not m:
                continue
            name = re.sub(r"\[.*\]", "", m.group(1))  # extras are not constraints
            if name.lower() not in SKIP:
                pins.append(f"{name}=={m.group(2)}")
    with open(out, "w") as f:
        f.write("# From vLLM's requirements/test/cpu.txt (scripts/ci-constraints.py)\n")
        f.write("\n".join(pins) + "\n")
    print(f"ci-constraints: {len(pins)} pins from {tree}/requirements/test/cpu.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
