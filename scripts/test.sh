#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what is missing, builds the sanitizer preset (default: dev = Debug + ASan + UBSan) and
# runs every test except those labelled gpu or long, then the Python package's tests (pytest in
# build/venv, comparing `import fsdpsim` with this preset's fsdpsim). Extra arguments go to ctest.
#   usage: scripts/test.sh [ctest args...]     FSDP_PRESET=ci scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${FSDP_PRESET:-dev}"
scripts/setup.sh "$preset"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
ctest --preset "$preset" "$@"
# ASan's runtime is not in the Python interpreter: the extension is built without sanitizers
# (pyproject.toml); the CLI it is compared with is this preset's sanitizer build.
FSDPSIM_EXE="$PWD/build/$preset/bin/fsdpsim" build/venv/bin/python -m pytest -q tests/python
