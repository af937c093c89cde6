#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerates the golden outputs in tests/golden (the ctest entries golden_*) from an fsdpsim
# binary: every command of tests/golden/manifest.txt is run first, and only when all succeed are
# the files rewritten (and files no longer in the manifest removed). Run it when a change moves a
# simulated result on purpose, and commit the golden files with the change; `git diff
# tests/golden` shows what moved. Debug (sanitizer) and release builds give the same bytes.
#   usage: scripts/update_golden.sh FSDPSIM      e.g. scripts/update_golden.sh build/release/bin/fsdpsim
set -euo pipefail
if [[ $# -ne 1 || ! -x "$1" ]]; then
  echo "usage: $0 FSDPSIM (an fsdpsim executable, e.g. build/release/bin/fsdpsim)" >&2
  exit 2
fi
exec bash "$(dirname "$0")/../tests/golden/golden.sh" update "$1"
