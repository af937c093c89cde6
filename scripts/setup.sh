#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs every Debian package the build needs that is missing (idempotent: a no-op when all are
# present), then configures and builds one CMake preset (default: release), then installs the
# Python package (`pip install .`, pyproject.toml) with pytest into the virtual environment
# build/venv, unless the sources it is built from are unchanged since the last install.
# pip needs network access to PyPI the first time (nanobind, scikit-build-core, pytest).
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
  python3-venv python3-dev                                      # the Python package, pytest
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

# The Python package: its own build (FSDP_PYTHON, the simulator's libraries only; nothing of the
# preset's build is reused), skipped when build/venv holds an install of the same sources.
venv=build/venv
pytest_version=9.2.0
stamp="$venv/.fsdpsim-sources"
sources_hash="$( { find core sim sweep viz planner python cmake -type f \
                     \( -name '*.cc' -o -name '*.h' -o -name '*.py' -o -name '*.pyi' \
                        -o -name '*.json' -o -name 'CMakeLists.txt' -o -name '*.cmake' \) \
                     -print0 | sort -z | xargs -0 sha1sum
                   sha1sum CMakeLists.txt pyproject.toml; echo "pytest $pytest_version"; } |
                 sha1sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$sources_hash" && -x "$venv/bin/python" ]]; then
  echo "setup: Python package in $venv is up to date"
else
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  echo "setup: pip install . into $venv (builds fsdpsim._core with $jobs jobs)"
  start=$SECONDS
  CMAKE_BUILD_PARALLEL_LEVEL="$jobs" "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "pytest==$pytest_version" .
  echo "$sources_hash" >"$stamp"
  echo "setup: installed the Python package in $((SECONDS - start)) s"
fi
