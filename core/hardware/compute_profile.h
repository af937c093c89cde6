// SPDX-License-Identifier: Apache-2.0
// ComputeProfile: what the simulator's per-op compute model (docs/design/simulator.md, "Per-op
// compute") knows of one GPU beyond its datasheet peaks: the SM count and GEMM tile that set wave
// quantization, the fp8 tensor peak, the achieved fraction of peak on large GEMMs, flash
// attention's achieved forward and backward rates, and the achieved share of HBM bandwidth of
// elementwise kernels. Figures are datasheet values or public measurements, or fitted once per
// GPU family by scripts/fit_compute.py; docs/hardware.md names the source of each. int64 base
// units (FLOP/s, count, thousandths); a plain value checked by validate_compute_profile.
#pragma once

#include <cstdint>

#include "core/base/expected.h"

namespace fsdp {

struct ComputeProfile {
  std::int64_t sm_count = 1;                  // streaming multiprocessors
  std::int64_t gemm_tile_m = 128;             // output tile of one GEMM thread block (rows)
  std::int64_t gemm_tile_n = 256;             // (columns)
  std::int64_t peak_fp8_flops = 0;            // dense fp8 tensor FLOP/s; 0: no fp8 tensor cores
  std::int64_t gemm_permille = 1000;          // achieved thousandths of the dense peak, large GEMMs
  // An fp8 GEMM's achieved share of the fp8 peak relative to a bf16 GEMM's share of the bf16 peak
  // (thousandths): fp8 GEMMs run at peak_fp8_flops x gemm_permille x this. Set by
  // scripts/fit_fp8.py from a published fp8-vs-bf16 linear microbenchmark (docs/hardware.md).
  std::int64_t fp8_gemm_relative_permille = 1000;
  std::int64_t attention_forward_flops = 1;   // flash attention forward, causal FLOPs counted
  std::int64_t attention_backward_flops = 1;  // backward (2.5 x the forward's FLOPs)
  // cuDNN's fused attention (what Transformer Engine runs), forward and backward.
  std::int64_t cudnn_attention_forward_flops = 1;
  std::int64_t cudnn_attention_backward_flops = 1;
  std::int64_t elementwise_permille = 1000;  // achieved thousandths of HBM bandwidth
  friend bool operator==(const ComputeProfile&, const ComputeProfile&) = default;
};

// Errors (kInvalidArgument) naming the field as "compute_profile.gemm_permille", the expected and
// the actual value: a count, tile or rate < 1 (peak_fp8_flops < 0), a permille outside [1, 1000].
Status validate_compute_profile(const ComputeProfile& profile);

}  // namespace fsdp
