#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One prepared check of the CUDA backend on a lent GPU machine: finds NCCL (the CUDA toolkit, then
# $NCCL_HOME, then the pip wheel nvidia-nccl-cu13), configures RelWithDebInfo with FSDP_CUDA=ON and
# tests on (no sanitizers: ASan and the CUDA driver do not mix), builds fsdp_cuda_tests and
# fsdpsim, runs the cases labelled gpu and cuda, then a short `fsdpsim train --backend cuda
# --check` (in-process ranks on GPU 0, sharded vs the unsharded host reference), one run started
# without mpirun over a file store (2 processes with >= 2 GPUs, else 1) and prints a summary.
# Fails on any failed case or train run, and on any case skipped for "no CUDA device" when
# nvidia-smi sees a GPU (such a skip means the test did not test anything; skips with another
# reason, e.g. a 2-GPU case on one GPU or a no-GPU case, are listed but allowed). Then, for
# information, the CPU backend's timing fidelity with a core per rank (QUICK=1 fidelity.sh).
#   usage: scripts/gpu-check.sh [build-dir]          (default build/gpu-check)
#   FSDP_GPU_CHECK_PREBUILT=1 scripts/gpu-check.sh DIR  runs DIR/bin/fsdp_cuda_tests without building
set -uo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/gpu-check}"
jobs="$(nproc 2>/dev/null || echo 2)"
log="$(mktemp -d)"

echo "== gpu-check: $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "nvidia-smi: no GPU visible"
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
command -v nvcc >/dev/null && nvcc --version | tail -1

# NCCL: prefer the toolkit's; otherwise a pip wheel (lib/libnccl.so.2 without the .so link).
nccl_args=()
if [[ ! -e /usr/local/cuda/include/nccl.h && -z "${NCCL_HOME:-}" ]]; then
  wheel="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null ||
           python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
  if [[ -n "$wheel" && -e "$wheel/include/nccl.h" ]]; then
    lib="$(ls "$wheel"/lib/libnccl.so* 2>/dev/null | head -1)"
    echo "NCCL from the pip wheel: $wheel ($lib)"
    nccl_args=(-DNCCL_INCLUDE_DIR="$wheel/include" -DNCCL_LIBRARY="$lib")
    export LD_LIBRARY_PATH="$wheel/lib:${LD_LIBRARY_PATH:-}"
  fi
fi

if [[ "${FSDP_GPU_CHECK_PREBUILT:-0}" != 1 ]]; then
  echo "== configure ($build)"
  if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFSDP_CUDA=ON \
       -DFSDP_BUILD_TESTS=ON -DFSDP_BUILD_PROPERTIES=OFF -DFSDP_SANITIZE= "${nccl_args[@]}" \
       >"$log/configure.txt" 2>&1; then
    tail -30 "$log/configure.txt"
    echo "gpu-check: FAILED (configure)"
    exit 1
  fi
  grep -E "fsdp: FSDP_CUDA" "$log/configure.txt"
  echo "== build fsdp_cuda_tests fsdpsim (-j$jobs)"
  start=$SECONDS
  if ! cmake --build "$build" --target fsdp_cuda_tests fsdpsim -j"$jobs" >"$log/build.txt" 2>&1; then
    grep -E "error|Error" -A3 "$log/build.txt" | head -40
    echo "gpu-check: FAILED (build)"
    exit 1
  fi
  echo "built in $((SECONDS - start)) s"
fi

bin="$build/bin/fsdp_cuda_tests"
missing="$(ldd "$bin" 2>/dev/null | grep 'not found' || true)"
[[ -n "$missing" ]] && { echo "missing shared libraries:"; echo "$missing"; }

echo "== run (gtest, every case of fsdp_cuda_tests)"
start=$SECONDS
"$bin" --gtest_color=no >"$log/tests.txt" 2>&1
rc=$?
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Expected|Which is|error:|no CUDA device" \
  "$log/tests.txt" | head -120
passed="$(grep -cE '^\[ +OK +\]' "$log/tests.txt" || true)"
failed="$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$log/tests.txt" || true)"
skipped="$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$log/tests.txt" || true)"
echo "== summary: passed $passed, failed $failed, skipped $skipped, rc $rc, $((SECONDS - start)) s; GPUs visible: $gpus"

# The CLI end to end on the GPU: two short runs checked against the host reference.
train_rc=0
fsdpsim="$build/bin/fsdpsim"
if [[ -x "$fsdpsim" ]]; then
  for args in "--mesh dp=2 --strategy zero3 --optimizer sgd_momentum --steps 3" \
              "--mesh dp=2 --strategy zero2 --microbatches 2 --steps 3"; do
    echo "== fsdpsim train --backend cuda $args --check"
    # shellcheck disable=SC2086
    timeout 300 "$fsdpsim" train --backend cuda $args --check 2>&1 | tail -6
    r=${PIPESTATUS[0]}
    echo "exit $r"
    [[ $r -ne 0 ]] && train_rc=$r
  done
  # Started without mpirun: one process per rank, meeting in a file store (NCCL ids through it).
  # Two processes need two GPUs (NCCL 2.28 refuses two members on one GPU); else world 1.
  store="file:$log/store"
  if [[ "$gpus" -ge 2 ]]; then
    echo "== fsdpsim train --backend cuda --mesh dp=2 --rank 0/1 --world-size 2 --store $store --check"
    store_args=(train --backend cuda --mesh dp=2 --steps 3 --world-size 2 --store "$store" --check)
    timeout 300 "$fsdpsim" "${store_args[@]}" --rank 1 >"$log/store-rank1.txt" 2>&1 &
    pid1=$!
    timeout 300 "$fsdpsim" "${store_args[@]}" --rank 0 2>&1 | tail -6
    r0=${PIPESTATUS[0]}
    wait "$pid1"
    r1=$?
    tail -3 "$log/store-rank1.txt"
    echo "exit rank 0: $r0, rank 1: $r1"
    [[ $r0 -ne 0 ]] && train_rc=$r0
    [[ $r1 -ne 0 ]] && train_rc=$r1
  else
    echo "== fsdpsim train --backend cuda --mesh dp=1 --rank 0 --world-size 1 --store $store --check"
    timeout 300 "$fsdpsim" train --backend cuda --mesh dp=1 --steps 3 --rank 0 --world-size 1 \
      --store "$store" --check 2>&1 | tail -6
    r=${PIPESTATUS[0]}
    echo "exit $r"
    [[ $r -ne 0 ]] && train_rc=$r
  fi
else
  echo "no $fsdpsim (FSDP_GPU_CHECK_PREBUILT without fsdpsim?)"
  train_rc=1
fi

# The lent machine has many cores: the CPU backend's timing fidelity (docs/design/fidelity.md) can
# be checked there with a core per rank, which a 2-core machine cannot. Informative only (its
# verdicts do not change this script's exit status); FSDP_GPU_CHECK_FIDELITY=0 skips it.
if [[ "${FSDP_GPU_CHECK_FIDELITY:-1}" != 0 && -x "$fsdpsim" ]] && command -v mpirun >/dev/null &&
   command -v python3 >/dev/null; then
  echo "== QUICK=1 scripts/fidelity.sh ($(nproc) cores)"
  BUILD="$build" QUICK=1 timeout 240 scripts/fidelity.sh "$log/fidelity" 2>&1 | tail -24 ||
    echo "fidelity: did not finish"
fi

if [[ $rc -ne 0 || "$failed" != 0 || $train_rc -ne 0 ]]; then
  echo "gpu-check: FAILED"
  exit 1
fi
# Skips that are meant (a no-GPU case on a GPU machine, a 2-GPU case on one GPU) say why; a skip
# for "no CUDA device" while nvidia-smi sees one means a gpu case tested nothing.
no_device="$(grep -c 'no CUDA device' "$log/tests.txt" || true)"
if [[ "$gpus" -gt 0 && "$no_device" != 0 ]]; then
  echo "gpu-check: FAILED ($no_device gpu cases skipped for 'no CUDA device' although a GPU is visible)"
  exit 1
fi
echo "gpu-check: OK"
