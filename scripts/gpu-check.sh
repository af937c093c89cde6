#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one prepared run on a lent GPU machine (docs/design/backends.md, "The GPU machine"). It runs
# from a bundle of scripts/gpu-bundle.sh (built on the CPU machine: the GPU machine has none of
# our Debian packages) under one overall deadline, each step under its own `timeout`, and writes
# at most five files into $OUT: summary.json (every step's outcome and the four answers below),
# log.txt (each step's command and the tail of its output), tests.txt (the CUDA test binary's
# output), trace.json (the timeline of the throughput run) and torch.json (the PyTorch anchor).
# It never waits for anything without a timeout.
#   1. Does it work?   fsdp_cuda_tests; `train --backend cuda --check` for every run of
#                      reference/runs.txt (ZeRO-3, HSDP, unpadded, recomputation; in-process ranks
#                      on the one GPU); compute-sanitizer memcheck on a short run.
#   2. Does it match?  each run's GPU losses against the CPU backend's (reference/, made by the
#                      bundle script with the same seed), max relative error <= 1e-4.
#   3. How fast?       a GPU-bound decoder: step time, achieved TFLOP/s against the IR's FLOPs,
#                      peak allocated / reserved; the same model in plain PyTorch beside it.
#   4. Predicted?      `calibrate --predict h200` a priori, and fitted to the throughput run
#                      (`calibrate --fit`), against the measured step of a second configuration.
# Without a GPU (or with FSDP_GPU_CHECK_SKIP_GPU=1) every GPU step is skipped and the rest still
# runs: the libraries resolve, the CPU cases of the CUDA tests pass, `--backend cuda` fails with
# its one-line error, the comparison code runs on the CPU backend, and the summary is written, so
# the script is tested end to end on the CPU machine (tests/backends/cuda/gpu_check_test.sh).
#   usage: OUT=DIR scripts/gpu-check.sh [BUNDLE]   (BUNDLE: default the bundle this script is in)
#   env: FSDP_GPU_CHECK_DEADLINE_S (default 480), FSDP_GPU_CHECK_SKIP_GPU=1
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bundle="${1:-$(cd "$here/.." && pwd)}"
[[ -x "$bundle/bin/fsdpsim" ]] || { echo "gpu-check: error: $bundle/bin/fsdpsim missing (make a bundle with scripts/gpu-bundle.sh)" >&2; exit 2; }
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
deadline=$((SECONDS + ${FSDP_GPU_CHECK_DEADLINE_S:-480}))
log="$out/log.txt"
: >"$log"
fsdpsim="$bundle/bin/fsdpsim"
tests_bin="$bundle/bin/fsdp_cuda_tests"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=scripts/gpu-env.sh
source "$bundle/scripts/gpu-env.sh" >>"$log" 2>&1

results=()   # JSON objects, one per step
answers=()   # "key": value pairs of the summary
failed=0
json_str() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
note() { echo "$*" | tee -a "$log"; }
result() {  # NAME STATUS DETAIL
  results+=("{\"step\": $(json_str "$1"), \"status\": \"$2\", \"detail\": $(json_str "$3")}")
  [[ "$2" == failed ]] && failed=1
  note "== $1: $2${3:+ ($3)}"
}
# run_step NAME LIMIT_S OUTFILE CMD...: runs CMD under min(LIMIT_S, time left), output to OUTFILE
# (and its tail to the log); returns CMD's status (124 on a timeout, 125 when no time was left).
run_step() {
  local name="$1" limit="$2" file="$3"
  shift 3
  local left=$((deadline - SECONDS))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    note "-- $name: skipped, the deadline has passed"
    return 125
  fi
  echo "-- $name (limit ${limit}s): $*" >>"$log"
  timeout --kill-after=5 "$limit" "$@" >"$file" 2>&1
  local rc=$?
  tail -15 "$file" | sed 's/^/   /' >>"$log"
  echo "   exit $rc" >>"$log"
  return $rc
}

gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
gpus="${gpus:-0}"
gpu_name="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
use_gpu=1
if [[ "${FSDP_GPU_CHECK_SKIP_GPU:-0}" == 1 || "$gpus" -eq 0 ]]; then
  use_gpu=0
fi
note "gpu-check: $(date -u +%FT%TZ) on $(hostname); GPUs: $gpus ${gpu_name:+($gpu_name)}; bundle $(head -1 "$bundle/MANIFEST" 2>/dev/null)"

# --- the bundle's libraries resolve ----------------------------------------------------------------
missing="$(ldd "$fsdpsim" "$tests_bin" 2>&1 | grep 'not found' | sort -u | tr -s ' \t' ' ' || true)"
if [[ -n "$missing" ]]; then
  result libraries failed "$missing"
else
  result libraries ok "every library resolves"
fi

# --- 1. does it work? ---------------------------------------------------------------------------
if ((use_gpu)); then
  run_step cuda-tests 200 "$out/tests.txt" "$tests_bin" --gtest_color=no
  rc=$?
else
  run_step cuda-tests 60 "$out/tests.txt" "$tests_bin" --gtest_color=no \
    --gtest_filter='CudaProbeTest.*:CudaErrorTest.*:NcclBootstrapTest.*'
  rc=$?
fi
passed="$(grep -cE '^\[ +OK +\]' "$out/tests.txt" || true)"
nfail="$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$out/tests.txt" || true)"
skipped="$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$out/tests.txt" || true)"
no_device="$(grep -c 'no CUDA device' "$out/tests.txt" || true)"
detail="passed $passed, failed $nfail, skipped $skipped, exit $rc"
if [[ $rc -ne 0 || "$nfail" != 0 || "$passed" == 0 ]]; then
  result cuda-tests failed "$detail; $(grep -E '^\[  FAILED  \]' "$out/tests.txt" | head -5 | tr '\n' ' ')"
elif ((use_gpu)) && [[ "$no_device" != 0 ]]; then
  result cuda-tests failed "$detail; $no_device cases skipped for 'no CUDA device' although a GPU is visible"
else
  result cuda-tests ok "$detail"
fi
answers+=("\"tests\": $(json_str "$detail")")

# Losses of a train output: "step N loss X" lines -> one value per line.
losses_of() { awk '/loss/ { for (i = 1; i <= NF; ++i) if ($i == "loss") print $(i + 1) }' "$1"; }
max_rel_err() {  # FILE_A FILE_B (one loss per line) -> max |a-b| / max(|b|, 1e-30), or "n/a"
  python3 - "$1" "$2" <<'PY'
import sys
a = [float(x) for x in open(sys.argv[1]).read().split()]
b = [float(x) for x in open(sys.argv[2]).read().split()]
if not a or len(a) != len(b):
    print("n/a")
else:
    print("%.3g" % max(abs(x - y) / max(abs(y), 1e-30) for x, y in zip(a, b)))
PY
}

train_answers=()
while read -r name args; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  read -r -a argv <<<"$args"
  run_file="$scratch/$name.txt"
  if ((use_gpu)); then
    run_step "train-$name" 90 "$run_file" "$fsdpsim" train --backend cuda "${argv[@]}" --check
    rc=$?
    check_line="$(grep -m1 'check (rank' "$run_file" || true)"
    [[ $rc -eq 0 ]] && status=ok || status=failed
    result "train-$name" "$status" "exit $rc; ${check_line:-no check line}"
  else
    # The CUDA path says why it cannot run, in one line; the CPU backend stands in for the GPU so
    # the comparison below runs.
    run_step "train-$name-cuda-refused" 30 "$scratch/refused.txt" "$fsdpsim" train --backend cuda "${argv[@]}"
    rc=$?
    if [[ $rc -eq 1 && $(wc -l <"$scratch/refused.txt") -eq 1 ]]; then
      result "train-$name" skipped "no GPU: $(cat "$scratch/refused.txt")"
    else
      result "train-$name" failed "no GPU, but --backend cuda gave exit $rc: $(head -c 300 "$scratch/refused.txt")"
    fi
    run_step "train-$name-cpu" 60 "$run_file" "$fsdpsim" train --backend cpu "${argv[@]}"
  fi
  # --- 2. does it match the CPU backend? ---
  losses_of "$run_file" >"$scratch/$name.got"
  losses_of "$bundle/reference/$name.txt" >"$scratch/$name.want"
  err="$(max_rel_err "$scratch/$name.got" "$scratch/$name.want")"
  if [[ "$err" != n/a ]] && python3 -c "import sys; sys.exit(0 if float('$err') <= 1e-4 else 1)"; then
    status=ok
  else
    status=failed
  fi
  result "match-$name" "$status" "losses vs the CPU backend: max relative error $err (tolerance 1e-4, $(wc -l <"$scratch/$name.got") steps)"
  train_answers+=("$(json_str "$name"): {\"max_rel_err_vs_cpu\": $(json_str "$err"), \"check\": $(json_str "$(grep -m1 'check (rank' "$run_file" || echo none)")}")
done <"$bundle/reference/runs.txt"
answers+=("\"runs\": {$(IFS=,; echo "${train_answers[*]}")}")

sanitizer="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)"
if ((use_gpu)) && [[ -n "$sanitizer" ]]; then
  run_step memcheck 150 "$scratch/memcheck.txt" "$sanitizer" --tool memcheck --error-exitcode 9 \
    "$fsdpsim" train --backend cuda --mesh dp=2 --steps 2 --check
  rc=$?
  summary_line="$(grep -m1 'ERROR SUMMARY' "$scratch/memcheck.txt" || true)"
  [[ $rc -eq 0 ]] && status=ok || status=failed
  result memcheck "$status" "exit $rc; ${summary_line:-no summary}"
else
  result memcheck skipped "$( ((use_gpu)) && echo 'compute-sanitizer not found' || echo 'no GPU')"
fi

# --- 3. how fast and how big? ---------------------------------------------------------------------
# A decoder that keeps the GPU busy (about 1.9 TFLOP per step in fp32 by the IR's count).
perf=(--mesh dp=1 --layers 8 --hidden 1024 --ffn 4096 --vocab 8192 --seq-len 512 --micro-batch-size 8)
perf_b=(--mesh dp=1 --layers 8 --hidden 1024 --ffn 4096 --vocab 8192 --seq-len 512 --micro-batch-size 4 --microbatches 2)
if ((use_gpu)); then
  run_step throughput 150 "$scratch/perf.txt" "$fsdpsim" train --backend cuda "${perf[@]}" --steps 6 \
    --trace "$out/trace.json"
  rc=$?
  read -r step_ms exposed_ms nsteps _ < <(python3 "$bundle/scripts/fidelity.py" measure "$out/trace.json" 2>/dev/null || echo "n/a n/a 0 0")
  result throughput "$( [[ $rc -eq 0 ]] && echo ok || echo failed)" "exit $rc; step $step_ms ms (median of $nsteps), exposed $exposed_ms ms"
  run_step throughput-b 150 "$scratch/perf-b.txt" "$fsdpsim" train --backend cuda "${perf_b[@]}" --steps 6 \
    --trace "$scratch/trace-b.json"
  read -r step_b_ms _ < <(python3 "$bundle/scripts/fidelity.py" measure "$scratch/trace-b.json" 2>/dev/null || echo "n/a")
  run_step torch-anchor 150 "$out/torch.json" python3 "$bundle/scripts/gpu_torch_anchor.py" \
    --layers 8 --hidden 1024 --ffn 4096 --vocab 8192 --seq-len 512 --micro-batch-size 8 --steps 6
  rc=$?
  result torch-anchor "$( [[ $rc -eq 0 ]] && echo ok || echo failed)" "$(head -c 400 "$out/torch.json")"
  flops=$((6 * 8 * 512 * (2 * 8 * 1024 * 4096 + 1024 * 8192)))
  tflops="$(python3 -c "print('%.2f' % ($flops / ($step_ms * 1e-3) / 1e12))" 2>/dev/null || echo n/a)"
  answers+=("\"throughput\": {\"step_ms\": $(json_str "$step_ms"), \"exposed_ms\": $(json_str "$exposed_ms"), \"flops_per_step\": $flops, \"achieved_tflops\": $(json_str "$tflops"), \"second_config_step_ms\": $(json_str "${step_b_ms:-n/a}"), \"torch\": $(cat "$out/torch.json" 2>/dev/null | head -1 | grep '^{' || echo null)}")
else
  result throughput skipped "no GPU"
  result torch-anchor skipped "no GPU"
  step_b_ms=n/a
fi

# --- 4. does the simulator predict it? --------------------------------------------------------
run_step predict-h200 60 "$scratch/predict.txt" "$fsdpsim" calibrate --predict h200 "${perf[@]}"
rc=$?
p_step="$(awk '$2 == "step_time_ms" {print $3}' "$scratch/predict.txt")"
result predict-h200 "$( [[ $rc -eq 0 && -n "$p_step" ]] && echo ok || echo failed)" "a priori step ${p_step:-?} ms on the h200 preset"
pred_answers="\"a_priori_step_ms\": $(json_str "${p_step:-n/a}")"
if ((use_gpu)) && [[ -s "$out/trace.json" ]]; then
  run_step fit 60 "$scratch/fit.txt" "$fsdpsim" calibrate "${perf[@]}" --fit "$out/trace.json" \
    --base h200 --name h200-fitted --out "$scratch/fitted.json"
  run_step predict-fitted 60 "$scratch/predict-b.txt" "$fsdpsim" calibrate --predict "$scratch/fitted.json" "${perf_b[@]}"
  f_step="$(awk '$2 == "step_time_ms" {print $3}' "$scratch/predict-b.txt")"
  run_step predict-h200-b 60 "$scratch/predict-hb.txt" "$fsdpsim" calibrate --predict h200 "${perf_b[@]}"
  pb_step="$(awk '$2 == "step_time_ms" {print $3}' "$scratch/predict-hb.txt")"
  result predict-fitted "$( [[ -n "$f_step" ]] && echo ok || echo failed)" \
    "second config: measured ${step_b_ms} ms, a priori ${pb_step:-?} ms, fitted on the first ${f_step:-?} ms"
  pred_answers+=", \"second_config\": {\"measured_step_ms\": $(json_str "$step_b_ms"), \"a_priori_step_ms\": $(json_str "${pb_step:-n/a}"), \"fitted_step_ms\": $(json_str "${f_step:-n/a}")}"
fi
answers+=("\"prediction\": {$pred_answers}")

steps_json="$(IFS=,; echo "${results[*]}")"
answers_json="$(IFS=,; echo "${answers[*]}")"
cat >"$out/summary.json" <<EOF
{"gpu_check": {"gpus": $gpus, "gpu": $(json_str "$gpu_name"), "gpu_steps": $use_gpu, "ok": $((1 - failed)), "elapsed_s": $SECONDS},
 "steps": [$steps_json],
 "answers": {$answers_json}}
EOF
python3 -m json.tool "$out/summary.json" >/dev/null 2>&1 || { note "gpu-check: summary.json is not valid JSON"; failed=1; }
if ((failed)); then
  note "gpu-check: FAILED (see $out/summary.json and $out/log.txt)"
  exit 1
fi
note "gpu-check: OK ($out/summary.json)"
