#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sourced on the GPU machine from a bundle of scripts/gpu-bundle.sh: puts the bundle's libraries
# and the NCCL and cuBLAS libraries of the machine's Python wheels (nvidia-nccl-cu13,
# nvidia-cublas, as PyTorch installs them) on LD_LIBRARY_PATH, and says which it found.
#   usage: source BUNDLE/scripts/gpu-env.sh
_fsdp_bundle="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_fsdp_wheel_dirs="$(python3 - <<'PY' 2>/dev/null
import glob, os, sys
dirs = []
for base in sys.path:
    for pattern in ("nvidia/*/lib/libnccl.so*", "nvidia/*/lib/libcublas*.so*",
                    "nvidia/*/lib/libcudart.so*", "torch/lib/libnccl.so*"):
        for f in glob.glob(os.path.join(base, pattern)):
            d = os.path.dirname(f)
            if d not in dirs:
                dirs.append(d)
print(":".join(dirs))
PY
)"
export LD_LIBRARY_PATH="$_fsdp_bundle/lib${_fsdp_wheel_dirs:+:$_fsdp_wheel_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FSDP_BUNDLE="$_fsdp_bundle"
echo "gpu-env: bundle $_fsdp_bundle; wheel libraries: ${_fsdp_wheel_dirs:-none found}"
unset _fsdp_bundle _fsdp_wheel_dirs
