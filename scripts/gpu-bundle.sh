#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the CUDA-enabled release binaries here and collects them, with every shared library they
# need, into one folder to carry to a GPU machine that has none of our Debian packages
# (docs/design/backends.md, "The GPU machine"). The folder holds:
#   bin/        fsdpsim and fsdp_cuda_tests (debug info stripped)
#   lib/        every library `ldd` names except the C library family, the driver's (libcuda,
#               libnvidia-*) and the large CUDA libraries the GPU machine has in its PyTorch
#               wheels (libnccl, libcublas, libcublasLt: found there by scripts/gpu-env.sh)
#   reference/  what the GPU run is compared with, made here on the CPU backend
#   scripts/    gpu-check.sh, gpu-env.sh, gpu_torch_anchor.py, fidelity.py
#   MANIFEST    sizes, the commit, and the libraries left to the GPU machine
# and packs it as OUT.tar.gz, the file to carry (the folder is about 50 MiB, 35 of them OpenBLAS's
# kernels for every x86 CPU; the tarball less than half), failing if the tarball exceeds 50 MiB.
# On the GPU machine: tar xzf gpu-bundle.tar.gz -C /tmp && OUT=... /tmp/gpu-bundle/scripts/gpu-check.sh
#   usage: scripts/gpu-bundle.sh [OUT]            (default build/gpu-bundle)
#   env: FSDP_BUNDLE_BUILD=DIR bundles an existing build folder instead of building the preset
#        gpu-release (build/gpu-release); FSDP_BUNDLE_LIMIT_MIB (default 50).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/gpu-bundle}"
build="${FSDP_BUNDLE_BUILD:-build/gpu-release}"
limit_mib="${FSDP_BUNDLE_LIMIT_MIB:-50}"

if [[ -z "${FSDP_BUNDLE_BUILD:-}" ]]; then
  echo "gpu-bundle: configure and build (preset gpu-release, $build)"
  cmake --preset gpu-release >/dev/null
  cmake --build "$build" --target fsdpsim fsdp_cuda_tests -j "$(nproc 2>/dev/null || echo 2)"
fi
for b in fsdpsim fsdp_cuda_tests; do
  [[ -x "$build/bin/$b" ]] || { echo "gpu-bundle: error: $build/bin/$b was not built" >&2; exit 1; }
done

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/reference" "$out/scripts"
for b in fsdpsim fsdp_cuda_tests; do
  strip --strip-debug -o "$out/bin/$b" "$build/bin/$b"
done

# Libraries: everything ldd resolves, minus what must come from the GPU machine itself.
#  - the C library family and the dynamic loader: the machine's own (a copied glibc would not
#    match its loader);
#  - the driver (libcuda, libnvidia-*): belongs to the installed kernel module;
#  - NCCL and cuBLAS: hundreds of MiB; the machine's PyTorch wheels (nvidia-nccl-cu13,
#    nvidia-cublas) provide the same sonames (libnccl.so.2, libcublas.so.13, libcublasLt.so.13).
left_to_machine='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libutil|libcuda\.so|libnvidia-|libnccl\.so|libcublas\.so|libcublasLt\.so)'
declare -A seen=()
left=()
for b in "$out/bin/"*; do
  while read -r name _ path _; do
    [[ -z "$name" || -n "${seen[$name]:-}" ]] && continue
    seen[$name]=1
    if [[ "$name" =~ $left_to_machine ]]; then
      left+=("$name")
      continue
    fi
    if [[ "$path" == "not" || ! -e "$path" ]]; then
      echo "gpu-bundle: error: $b needs $name, which ldd cannot find here" >&2
      exit 1
    fi
    cp -L "$path" "$out/lib/$name"
  done < <(ldd "$b" | sed -n 's/^[[:space:]]*\([^ ]*\) => \([^ ]*\).*/\1 x \2 x/p')
done
strip --strip-unneeded "$out/lib/"* 2>/dev/null || true

# The reference the GPU losses are compared with (question 2): the CPU backend's losses for the
# same seed, model and configurations as gpu-check.sh's runs.
ref_bin="$build/bin/fsdpsim"
while read -r name args; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  # shellcheck disable=SC2086
  if ! "$ref_bin" train --backend cpu $args >"$out/reference/$name.txt" 2>&1; then
    echo "gpu-bundle: error: the CPU reference run '$name' failed:" >&2
    tail -3 "$out/reference/$name.txt" >&2
    exit 1
  fi
done < scripts/gpu-runs.txt
cp scripts/gpu-runs.txt "$out/reference/runs.txt"

cp scripts/gpu-check.sh scripts/gpu-env.sh scripts/gpu_torch_anchor.py scripts/fidelity.py "$out/scripts/"

size_kib="$(du -sk "$out" | cut -f1)"
{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "built $(date -u +%FT%TZ) on $(hostname)"
  echo "size_kib $size_kib"
  echo "left_to_machine ${left[*]}"
  (cd "$out" && find bin lib reference scripts -type f -printf '%s %p\n' | sort -k2)
} >"$out/MANIFEST"
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
tar_kib="$(du -k "$out.tar.gz" | cut -f1)"
echo "gpu-bundle: $out: $((size_kib / 1024)) MiB ($(ls "$out/lib" | wc -l) libraries; left to the" \
  "GPU machine: ${left[*]}); carry $out.tar.gz: $((tar_kib / 1024)) MiB"
if ((tar_kib > limit_mib * 1024)); then
  echo "gpu-bundle: error: $out.tar.gz is $((tar_kib / 1024)) MiB; the limit is $limit_mib MiB" >&2
  exit 1
fi
