#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package the build needs that is missing (idempotent: a no-op when all are
# present), then configures and builds one CMake preset (default: release).
#   usage: scripts/setup.sh [PRESET]      e.g. scripts/setup.sh dev
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"

packages=(
  cmake g++ make pkg-config
  libboost-dev libboost-program-options-dev libboost-graph-dev  # options parsing, graphs
  nlohmann-json3-dev                                            # JSON
  libtomlplusplus-dev                                           # torchtitan TOML configs
  googletest libgtest-dev libgmock-dev libbenchmark-dev          # tests, benchmarks
  librapidcheck-dev                                             # property tests
  graphviz                                                      # dot, to render schedules
  libopenmpi-dev openmpi-bin                                    # CPU backend
  libopenblas-dev                                               # CPU matmuls
)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
else
  echo "setup: all ${#packages[@]} packages present"
fi

jobs="$(nproc 2>/dev/null || echo 2)"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
echo "setup: built preset '$preset' in build/$preset"
