// SPDX-License-Identifier: Apache-2.0
// Every figure below is from the datasheet named for it in docs/hardware.md. Dense tensor rates
// are half the "with sparsity" figures the datasheets print; HBM sizes printed as "GB" are taken
// as GiB, which is what nvidia-smi reports for these parts (e.g. 81920 MiB for A100 80GB).
#include "core/hardware/hardware_presets.h"

#include <vector>

#include "core/base/check.h"
#include "core/base/strings.h"

namespace fsdp {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;
constexpr std::int64_t kGB = 1000LL * 1000 * 1000;
constexpr std::int64_t kTera = 1000LL * kGB;
// Gb/s of a network port to bytes/s.
constexpr std::int64_t gbit_per_s(std::int64_t gbit) { return gbit * kGB / 8; }

// Not datasheet figures: representative one-way small-message latencies of NCCL point-to-point
// traffic over NVLink/NVSwitch and over one InfiniBand switch hop (docs/hardware.md).
constexpr std::int64_t kNvlinkLatencyNs = 1000;
constexpr std::int64_t kInfinibandLatencyNs = 5000;

// NVLink SHARP: NCCL's nvlsEfficiency (src/graph/tuning.cc, NCCL 2.28) for GPUs on a
// third-generation (Hopper) or fifth-generation (Blackwell) NVSwitch; Ampere's NVSwitch has none.
constexpr std::int64_t kHopperNvlsPermille = 850;
constexpr std::int64_t kBlackwellNvlsPermille = 740;

// The per-op compute model's figures (docs/hardware.md, "Per-op compute figures"). SM counts and
// fp8 peaks from the datasheets and architecture whitepapers. Flash attention (FlashAttention-2,
// what PyTorch's SDPA runs): Hopper figures are the FlashAttention-3 paper's measurements of
// FlashAttention-2 on an H100 SXM5 (head dim 128, sequence 8k: 333 TFLOP/s causal forward, 318
// backward; cuDNN 529 and 518); Ampere from the FlashAttention-2 paper (73% of peak forward, 63%
// backward on an A100; Transformer Engine runs flash-attn there too).
// gemm_permille is fitted once per GPU family on the published runs by scripts/fit_compute.py.
// Elementwise kernels reach 80% of HBM bandwidth (the simulator's memory_efficiency default).
constexpr std::int64_t kElementwisePermille = 800;
// Fitted 2026-12-03 by scripts/fit_compute.py on the nine visible runs (docs/validation.md).
constexpr std::int64_t kA100GemmPermille = 718;     // family a100 (TTA-3, TTA-4)
constexpr std::int64_t kH100GemmPermille = 497;     // family h100 (AO-H1, AO-H2, MB-1, MP-1, MP-4)
constexpr std::int64_t kH100x96GemmPermille = 517;  // family h100-96gb (TT-1a, PR-3)
// fp8 GEMMs on Hopper reach 83.9% of the bf16 GEMMs' share of peak: set by scripts/fit_fp8.py
// from torchao's float8 linear microbenchmark on an H100 (1.39x at M, K, N = 4096, 8192, 16384),
// not from the training runs. Blackwell has no such measurement: the Hopper figure is assumed.
constexpr std::int64_t kHopperFp8RelativePermille = 839;

ComputeProfile ampere_profile() {
  return {.sm_count = 108,
          .gemm_tile_m = 256,
          .gemm_tile_n = 128,
          .peak_fp8_flops = 0,
          .gemm_permille = kA100GemmPermille,
          .attention_forward_flops = 228 * kTera,
          .attention_backward_flops = 197 * kTera,
          .cudnn_attention_forward_flops = 228 * kTera,
          .cudnn_attention_backward_flops = 197 * kTera,
          .elementwise_permille = kElementwisePermille};
}

// H100 and H200 (the same GH100 die): fp8 dense 1,979 TFLOP/s. A power-limited part keeps the
// peaks but sustains a lower clock: its fitted GEMM efficiency scales attention alike.
ComputeProfile hopper_profile(std::int64_t gemm_permille) {
  const auto scaled = [&](std::int64_t flops) { return flops / kH100GemmPermille * gemm_permille; };
  return {.sm_count = 132,
          .gemm_tile_m = 128,
          .gemm_tile_n = 256,
          .peak_fp8_flops = 1'979 * kTera,
          .gemm_permille = gemm_permille,
          .fp8_gemm_relative_permille = kHopperFp8RelativePermille,
          .attention_forward_flops = scaled(333 * kTera),
          .attention_backward_flops = scaled(318 * kTera),
          .cudnn_attention_forward_flops = scaled(529 * kTera),
          .cudnn_attention_backward_flops = scaled(518 * kTera),
          .elementwise_permille = kElementwisePermille};
}

// Blackwell (B200, GB200): no published run to fit on; the Hopper fit and Hopper's attention
// efficiency scaled by the bf16 peak are assumptions until one exists.
ComputeProfile blackwell_profile(std::int64_t peak_bf16, std::int64_t peak_fp8) {
  const auto scaled = [&](std::int64_t flops) { return flops / 989'500 * (peak_bf16 / kGB); };
  return {.sm_count = 148,
          .gemm_tile_m = 128,
          .gemm_tile_n = 256,
          .peak_fp8_flops = peak_fp8,
          .gemm_permille = kH100GemmPermille,
          .fp8_gemm_relative_permille = kHopperFp8RelativePermille,
          .attention_forward_flops = scaled(333 * kTera),
          .attention_backward_flops = scaled(318 * kTera),
          .cudnn_attention_forward_flops = scaled(529 * kTera),
          .cudnn_attention_backward_flops = scaled(518 * kTera),
          .elementwise_permille = kElementwisePermille};
}

std::vector<Hardware> make_presets() {
  const HardwareSpec specs[] = {
      {.name = "a100",
       .description =
           "DGX A100: 8x A100-SXM4-80GB, NVLink 3 (600 GB/s), 8x HDR InfiniBand 200 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 80 * kGiB,
       .peak_bf16_flops = 312 * kTera,
       .peak_fp32_flops = 19'500 * kGB,
       .hbm_bytes_per_s = 2'039 * kGB,
       .intra_node_bytes_per_s = 300 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(200),
       .inter_node_latency_ns = kInfinibandLatencyNs,
       .nics_per_node = 8,
       .nvls_permille = 0,
       .collectives = CollectiveModel::kNccl,
       .compute_profile = ampere_profile()},
      {.name = "a100-40gb",
       .description =
           "DGX A100: 8x A100-SXM4-40GB, NVLink 3 (600 GB/s), 8x HDR InfiniBand 200 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 40 * kGiB,
       .peak_bf16_flops = 312 * kTera,
       .peak_fp32_flops = 19'500 * kGB,
       .hbm_bytes_per_s = 1'555 * kGB,
       .intra_node_bytes_per_s = 300 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(200),
       .inter_node_latency_ns = kInfinibandLatencyNs,
       .nics_per_node = 8,
       .nvls_permille = 0,
       .collectives = CollectiveModel::kNccl,
       .compute_profile = ampere_profile()},
      {.name = "h100",
       .description =
           "DGX H100: 8x H100-SXM5-80GB, NVLink 4 (900 GB/s), 8x NDR InfiniBand 400 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 80 * kGiB,
       .peak_bf16_flops = 989'500 * kGB,
       .peak_fp32_flops = 67 * kTera,
       .hbm_bytes_per_s = 3'350 * kGB,
       .intra_node_bytes_per_s = 450 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(400),
       .inter_node_latency_ns = kInfinibandLatencyNs,
       .nics_per_node = 8,
       .nvls_permille = kHopperNvlsPermille,
       .collectives = CollectiveModel::kNccl,
       .compute_profile = hopper_profile(kH100GemmPermille)},
      {.name = "h100-96gb",
       .description =
           "8x H100 96 GB HBM2e (2.4 TB/s, 500 W power limit), NVLink 4, 400 Gb/s RDMA per GPU",
       .devices_per_node = 8,
       .memory_bytes = 96 * kGiB,
       .peak_bf16_flops = 989'500 * kGB,
       .peak_fp32_flops = 67 * kTera,
       .hbm_bytes_per_s = 2'400 * kGB,
       .intra_node_bytes_per_s = 450 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(400),
       .inter_node_latency_ns = kInfinibandLatencyNs,
       .nics_per_node = 8,
       .nvls_permille = kHopperNvlsPermille,
       .collectives = CollectiveModel::kNccl,
       .compute_profile = hopper_profile(kH100x96GemmPermille)},
      {.name = "h200",
       .description =
           "DGX H200: 8x H200-SXM-141GB, NVLink 4 (900 GB/s), 8x NDR InfiniBand 400 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 141 * kGiB,
       .peak_bf16_flops = 989'500 * kGB,
       .peak_fp32_flops = 67 * kTera,
       .hbm_bytes_per_s = 4'800 * kGB,
       .intra_node_bytes_per_s = 450 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(400),
       .inter_node_latency_ns = kInfinibandLatencyNs,
       .nics_per_node = 8,
       .nvls_permille = kHopperNvlsPermille,
       .collectives = CollectiveModel::kNccl,
       .compute_profile = hopper_profile(kH100GemmPermille)},
      {.name = "b200",
       .description = "DGX B200: 8x B200-180GB, NVLink 5 (1.8 TB/s), 8x NDR InfiniBand 400 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 180 * kGiB,
       .peak_bf16_flops = 2'250 * kTera,
       .peak_fp32_flops = 75 * kTera,
       .hbm_bytes_per_s = 8'000 * kGB,
       .intra_node_bytes_per_s = 900 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(400),
       .inter_node_latency_ns = kInfinibandLatencyNs,
       .nics_per_node = 8,
       .nvls_permille = kBlackwellNvlsPermille,
       .collectives = CollectiveModel::kNccl,
       .compute_profile = blackwell_profile(2'250 * kTera, 4'500 * kTera)},
      {.name = "gb200",
       .description =
           "GB200 NVL72: 72x B200 (186 GB HBM3e) in one NVLink 5 domain, 400 Gb/s per GPU",
       .devices_per_node = 72,
       .memory_bytes = 186 * kGiB,
       .peak_bf16_flops = 2'500 * kTera,
       .peak_fp32_flops = 80 * kTera,
       .hbm_bytes_per_s = 8'000 * kGB,
       .intra_node_bytes_per_s = 900 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(400),
       .inter_node_latency_ns = kInfinibandLatencyNs,
       .nics_per_node = 72,
       .nvls_permille = kBlackwellNvlsPermille,
       .collectives = CollectiveModel::kNccl,
       .compute_profile = blackwell_profile(2'500 * kTera, 5'000 * kTera)},
  };
  std::vector<Hardware> out;
  for (const HardwareSpec& spec : specs) {
    auto hw = Hardware::make(spec);
    FSDP_CHECK(hw.has_value()) << "built-in hardware preset is invalid: " << hw.error().message();
    out.push_back(std::move(hw).value());
  }
  return out;
}

}  // namespace

std::span<const Hardware> hardware_presets() {
  static const std::vector<Hardware> presets = make_presets();
  return presets;
}

Expected<Hardware> find_hardware_preset(std::string_view name) {
  std::vector<std::string_view> names;
  for (const Hardware& hw : hardware_presets()) {
    if (hw.name() == name) {
      return hw;
    }
    names.push_back(hw.name());
  }
  return Error(ErrorCode::kInvalidArgument,
               str_cat("hardware preset: expected one of ", join(names, ", "), ", got '", name,
                       "'"));
}

}  // namespace fsdp
