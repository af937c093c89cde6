#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan+UBSan; docs/user-guide.md,
# "Fuzzing the command line") and runs one for N seconds on a copy of its seed corpus.
#   scripts/fuzz.sh [TARGET] [SECONDS] [JOBS]     default: cli_args_fuzz 300 1
# TARGET: cli_args_fuzz | model_json_fuzz | hub_config_fuzz | hardware_json_fuzz.
# Installs clang-14 with apt-get when it is missing. Findings (crash-*, leak-*, timeout-*) are
# written to build/fuzz/findings/TARGET/; the run ends with libFuzzer's exec count.
set -euo pipefail
target="${1:-cli_args_fuzz}"
seconds="${2:-300}"
jobs="${3:-1}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! command -v clang++-14 >/dev/null; then
  apt-get update && apt-get install -y clang-14 libclang-rt-14-dev
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "$target"
case "$target" in
  cli_args_fuzz) seeds=fuzz/corpus/cli_args; extra=() ;;
  model_json_fuzz) seeds=fuzz/corpus/model_json; extra=() ;;
  hub_config_fuzz) seeds=fuzz/corpus/hub_config; extra=(-dict=fuzz/hub_config.dict) ;;
  hardware_json_fuzz) seeds=fuzz/corpus/hardware_json; extra=() ;;
  *) echo "fuzz.sh: unknown target '$target'" >&2; exit 2 ;;
esac
corpus="build/fuzz/corpus/$target"
findings="build/fuzz/findings/$target"
mkdir -p "$corpus" "$findings"
# Leaks are reported at exit by ASan; the sanitizers abort on the first report.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OPENBLAS_NUM_THREADS=1
if [ "$jobs" -gt 1 ]; then
  extra+=(-jobs="$jobs" -workers="$jobs")  # parallel runs log to fuzz-N.log
fi
"build/fuzz/bin/$target" "${extra[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=512 \
  -artifact_prefix="$findings/" "$corpus" "$seeds"
