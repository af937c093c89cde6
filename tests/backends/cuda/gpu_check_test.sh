#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu-check.sh end to end on a machine without a GPU (its GPU steps skipped): bundles the
# build folder BUILD with scripts/gpu-bundle.sh, runs the check from the bundle, and asserts that
# it passes, writes a valid summary.json with every step, at most eight files in $OUT, and that
# the bundle's libraries resolve from the bundle alone.
#   usage: gpu_check_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$src"
FSDP_BUNDLE_BUILD="$build" FSDP_BUNDLE_LIMIT_MIB=4096 scripts/gpu-bundle.sh "$work/bundle"
for f in bin/fsdpsim bin/fsdp_cuda_tests scripts/gpu-check.sh reference/runs.txt MANIFEST; do
  [[ -e "$work/bundle/$f" ]] || { echo "FAIL: the bundle lacks $f"; exit 1; }
done
grep -q '^left_to_machine .*libcudart' "$work/bundle/MANIFEST" &&
  { echo "FAIL: libcudart must be bundled, not left to the machine"; exit 1; }
OUT="$work/out" FSDP_GPU_CHECK_SKIP_GPU=1 FSDP_GPU_CHECK_DEADLINE_S=300 \
  "$work/bundle/scripts/gpu-check.sh" || { echo "FAIL: gpu-check.sh exited $?"; cat "$work/out/log.txt"; exit 1; }
n="$(find "$work/out" -type f | wc -l)"
((n <= 8)) || { echo "FAIL: $n files in OUT (at most 8 come back)"; exit 1; }
python3 - "$work/out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
steps = {x["step"]: x["status"] for x in s["steps"]}
assert s["gpu_check"]["ok"] == 1, s
assert s["gpu_check"]["gpu_steps"] == 0, s
for name in ("libraries", "cuda-tests", "train-zero3", "match-zero3", "match-hsdp",
             "match-unpadded", "match-recompute", "predict-h200"):
    assert steps.get(name) in ("ok", "skipped"), (name, steps.get(name))
assert steps["libraries"] == "ok" and steps["cuda-tests"] == "ok", steps
assert steps["match-zero3"] == "ok" and steps["predict-h200"] == "ok", steps
assert steps["train-zero3"] == "skipped", steps
print("gpu-check without a GPU: ok,", len(steps), "steps")
PY
