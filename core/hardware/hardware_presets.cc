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

std::vector<Hardware> make_presets() {
  const HardwareSpec specs[] = {
      {.name = "a100",
       .description = "DGX A100: 8x A100-SXM4-80GB, NVLink 3 (600 GB/s), 8x HDR InfiniBand 200 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 80 * kGiB,
       .peak_bf16_flops = 312 * kTera,
       .peak_fp32_flops = 19'500 * kGB,
       .hbm_bytes_per_s = 2'039 * kGB,
       .intra_node_bytes_per_s = 300 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(200),
       .inter_node_latency_ns = kInfinibandLatencyNs},
      {.name = "h100",
       .description = "DGX H100: 8x H100-SXM5-80GB, NVLink 4 (900 GB/s), 8x NDR InfiniBand 400 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 80 * kGiB,
       .peak_bf16_flops = 989'500 * kGB,
       .peak_fp32_flops = 67 * kTera,
       .hbm_bytes_per_s = 3'350 * kGB,
       .intra_node_bytes_per_s = 450 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(400),
       .inter_node_latency_ns = kInfinibandLatencyNs},
      {.name = "h200",
       .description = "DGX H200: 8x H200-SXM-141GB, NVLink 4 (900 GB/s), 8x NDR InfiniBand 400 Gb/s",
       .devices_per_node = 8,
       .memory_bytes = 141 * kGiB,
       .peak_bf16_flops = 989'500 * kGB,
       .peak_fp32_flops = 67 * kTera,
       .hbm_bytes_per_s = 4'800 * kGB,
       .intra_node_bytes_per_s = 450 * kGB,
       .intra_node_latency_ns = kNvlinkLatencyNs,
       .inter_node_bytes_per_s = gbit_per_s(400),
       .inter_node_latency_ns = kInfinibandLatencyNs},
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
       .inter_node_latency_ns = kInfinibandLatencyNs},
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
