#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Simulator vs CPU backend (docs/design/fidelity.md): calibrates this machine once with
# `fsdpsim calibrate` under mpirun (4 ranks), then for every configuration of a table (layouts x
# prefetch x microbatches) trains a few steps with `fsdpsim train --trace` and asks the simulator
# for its prediction with the calibrated file (`fsdpsim calibrate --predict`). Writes
# OUT/fidelity.csv and OUT/fidelity.svg (predicted vs measured) and prints the table with relative
# errors. Needs a release build (built here if missing), Open MPI and python3.
#   usage: scripts/fidelity.sh [OUT]
#   env: BUILD=build/release  STEPS=4  QUICK=1 (a subset of the table)  MODEL="--layers 2 ..."
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-fidelity-out}"
build="${BUILD:-build/release}"
steps="${STEPS:-4}"
fsdpsim="$build/bin/fsdpsim"
mkdir -p "$out"
if [[ ! -x "$fsdpsim" ]]; then
  echo "== building $fsdpsim (release)"
  cmake --preset release -B "$build" > /dev/null
  cmake --build "$build" --target fsdpsim -j2 > /dev/null
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(mpirun -np 4 --oversubscribe --bind-to none)
# Steps of about 0.5-2 s on a 2-core machine with 4 ranks; the layers dominate the compute.
read -r -a sizes <<< "${MODEL:---layers 4 --hidden 256 --ffn 1024 --vocab 1024 --seq-len 128 --micro-batch-size 4}"
model=(--mesh dp=4 "${sizes[@]}" --optimizer adam)
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started ))s"; }

echo "== [$(elapsed)] calibrating (4 ranks at once)"
"${mpirun[@]}" "$fsdpsim" calibrate --backend cpu "${model[@]}" --repeats 3 --iters 5 \
  --out "$out/cpu.json" | tee "$out/calibrate.log"

# The second hardware file: cpu.json with the rates of one real run (padded, no prefetch, one
# microbatch; the steps after the first), as `fsdpsim calibrate --fit` takes them from its traces.
echo "== [$(elapsed)] fitting to one run (padded/prefetch=0/mb=1)"
fit_config=("${model[@]}" --shard-layout padded --prefetch none --microbatches 1)
"${mpirun[@]}" "$fsdpsim" train "${fit_config[@]}" --steps "$steps" \
  --trace "$out/fit-run-r{rank}.json" > "$out/train.log"
"$fsdpsim" calibrate "${fit_config[@]}" --fit "$out"/fit-run-r*.json --base "$out/cpu.json" \
  --name cpu-fitted --out "$out/cpu-fitted.json" | tee "$out/fit.log"

layouts=(padded unpadded tensor-atomic)
prefetches=(0 1 2)
microbatches=(1 4)
if [[ -n "${QUICK:-}" ]]; then
  layouts=(padded unpadded)
  prefetches=(0 1)
fi
csv="$out/fidelity.csv"
echo "config,layout,prefetch,microbatches,measured_step_ms,predicted_step_ms,measured_exposed_ms,predicted_exposed_ms,steps,fitted_step_ms,fitted_exposed_ms" > "$csv"
for layout in "${layouts[@]}"; do
  case "$layout" in
    padded) layout_flags=(--shard-layout padded) ;;
    unpadded) layout_flags=(--shard-layout unpadded) ;;
    tensor-atomic) layout_flags=(--tensor-atomic) ;;
  esac
  for prefetch in "${prefetches[@]}"; do
    if [[ "$prefetch" == 0 ]]; then pf=none; else pf="next($prefetch)"; fi
    for mb in "${microbatches[@]}"; do
      name="$layout/prefetch=$prefetch/mb=$mb"
      base="$out/trace-$layout-p$prefetch-mb$mb"
      file="$base-r{rank}.json"  # every rank writes its own trace
      config=("${model[@]}" "${layout_flags[@]}" --prefetch "$pf" --microbatches "$mb")
      echo "== [$(elapsed)] $name"
      "${mpirun[@]}" "$fsdpsim" train "${config[@]}" --steps "$steps" --trace "$file" \
        > "$out/train.log"
      read -r m_step m_exposed n _ < <(python3 scripts/fidelity.py measure "$base"-r*.json)
      pred=$("$fsdpsim" calibrate --predict "$out/cpu.json" "${config[@]}")
      p_step=$(awk '$2 == "step_time_ms" {print $3}' <<< "$pred")
      p_exposed=$(awk '$2 == "exposed_communication_ms" {print $3}' <<< "$pred")
      pred=$("$fsdpsim" calibrate --predict "$out/cpu-fitted.json" "${config[@]}")
      f_step=$(awk '$2 == "step_time_ms" {print $3}' <<< "$pred")
      f_exposed=$(awk '$2 == "exposed_communication_ms" {print $3}' <<< "$pred")
      echo "   measured $m_step ms (exposed $m_exposed), predicted $p_step ms (exposed" \
        "$p_exposed), fitted $f_step ms (exposed $f_exposed)"
      echo "$name,$layout,$prefetch,$mb,$m_step,$p_step,$m_exposed,$p_exposed,$n,$f_step,$f_exposed" >> "$csv"
    done
  done
done
python3 scripts/fidelity.py plot "$csv" "$out/fidelity.svg"
echo "== [$(elapsed)] done: $csv, $out/fidelity.svg"
python3 scripts/fidelity.py table "$csv"
