#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that two fsdpsim binaries simulate bit-identically: runs `simulate --format json` on a
# set of configurations (contention on and off, SM slowdown, stragglers, HSDP, unpadded,
# tensor-atomic, unified streams with recompute, HFSDP, ZeRO-2) and a Chrome trace with each
# binary and compares the outputs byte for byte. Use it before and after an engine change that
# must not move any result.
#
# usage: scripts/compare_sim_outputs.sh OLD_FSDPSIM NEW_FSDPSIM [OUT_DIR]
# exit 0 when every output is identical, 1 when one differs (its diff is printed), 2 on misuse.
set -u
if [[ $# -lt 2 || ! -x "$1" || ! -x "$2" ]]; then
  echo "usage: $0 OLD_FSDPSIM NEW_FSDPSIM [OUT_DIR] (both must be executables)" >&2
  exit 2
fi
old=$1
new=$2
out=${3:-$(mktemp -d)}
mkdir -p "$out"
configs=(
  ""
  "--no-contention"
  "--sm-slowdown 1.3"
  "--straggler rank=3,compute=1.5,link=2"
  "--mesh dp_outer=2,dp_inner=8 --strategy hsdp --microbatches 8"
  "--shard-layout unpadded --mesh dp=64 --hardware h200"
  "--tensor-atomic --mesh dp=32 --microbatches 2"
  "--unified-streams --recompute full-all-units --prefetch next(2)"
  "--model llama-3-70b --mesh dp_outer=8,dp_inner=8 --strategy hfsdp --sm-slowdown 1.2"
  "--strategy zero2 --microbatches 3 --straggler fraction=0.25,compute=1.2"
)
status=0
for i in "${!configs[@]}"; do
  # shellcheck disable=SC2086  # the options are split on purpose
  "$old" simulate --format json ${configs[$i]} >"$out/old$i.json" 2>&1
  # shellcheck disable=SC2086
  "$new" simulate --format json ${configs[$i]} >"$out/new$i.json" 2>&1
  if cmp -s "$out/old$i.json" "$out/new$i.json"; then
    echo "same: simulate ${configs[$i]}"
  else
    echo "DIFFERENT: simulate ${configs[$i]}"
    diff "$out/old$i.json" "$out/new$i.json" | head -20
    status=1
  fi
done
"$old" simulate --trace "$out/old_trace.json" >/dev/null
"$new" simulate --trace "$out/new_trace.json" >/dev/null
if cmp -s "$out/old_trace.json" "$out/new_trace.json"; then
  echo "same: simulate --trace"
else
  echo "DIFFERENT: simulate --trace"
  status=1
fi
exit $status
