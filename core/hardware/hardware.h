// SPDX-License-Identifier: Apache-2.0
// Hardware: what the planner and the simulator need to know about one kind of training node and
// its network: devices per node, memory and peak dense math per device, HBM bandwidth, and the
// bandwidth and latency of the intra-node (NVLink) and inter-node (network) links, the node's NICs,
// and how its collectives are costed (NCCL's model or plain alpha-beta rings). All figures are
// int64 in base units (bytes, FLOP/s, bytes/s, ns). Immutable; built by Hardware::make.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "core/base/expected.h"
#include "core/hardware/calibration.h"
#include "core/hardware/compute_profile.h"

namespace fsdp {

// How the simulator prices this hardware's collectives (docs/design/simulator.md, "Collectives"):
// NCCL's tuning model (rings with channels over the node's NICs, trees, NVLS, per-protocol
// latency and bandwidth) or one alpha-beta ring per axis at one link's bandwidth (what MPI on a
// CPU cluster, or a hardware file without the field, gets).
enum class CollectiveModel : std::uint8_t { kAlphaBeta, kNccl };
std::string_view to_string(CollectiveModel model);  // "alpha-beta", "nccl"

// The plain fields, as written in a hardware JSON file (docs/hardware.md).
struct HardwareSpec {
  std::string name;                      // "h100"
  std::string description;               // free text, may be empty
  std::int64_t devices_per_node = 0;     // GPUs sharing one NVLink domain
  std::int64_t memory_bytes = 0;         // HBM per device
  std::int64_t peak_bf16_flops = 0;      // dense (no sparsity) bf16 tensor FLOP/s per device
  std::int64_t peak_fp32_flops = 0;      // dense fp32 (non-tensor) FLOP/s per device
  std::int64_t hbm_bytes_per_s = 0;      // HBM bandwidth per device
  std::int64_t intra_node_bytes_per_s = 0;  // NVLink, per device, per direction
  std::int64_t intra_node_latency_ns = 0;
  // Network, per direction: per NIC under the NCCL model, per device under alpha-beta.
  std::int64_t inter_node_bytes_per_s = 0;
  std::int64_t inter_node_latency_ns = 0;
  // NICs per node for inter-node traffic; 0 = one per device (Hardware::make normalises it).
  std::int64_t nics_per_node = 0;
  // NVLink SHARP (NVLS) all-reduce efficiency in 1/1000 (NCCL's nvlsEfficiency: 850 Hopper, 740
  // Blackwell); 0 = the node has no NVLS.
  std::int64_t nvls_permille = 0;
  CollectiveModel collectives = CollectiveModel::kAlphaBeta;
  // Measured figures (fsdpsim calibrate); the simulator prefers them where present.
  std::optional<Calibration> calibration = std::nullopt;
  // The per-op compute model's figures; without them compute ops cost from their FLOPs.
  std::optional<ComputeProfile> compute_profile = std::nullopt;
  friend bool operator==(const HardwareSpec&, const HardwareSpec&) = default;
};

class Hardware {
 public:
  // Errors (kInvalidArgument), naming the field, the expected and the actual value: a bad name,
  // a description with control characters, a count, size, rate or bandwidth < 1, a latency < 0,
  // nics_per_node < 0, nvls_permille outside [0, 1000], a calibration that validate_calibration
  // rejects.
  static Expected<Hardware> make(HardwareSpec spec);

  const HardwareSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  const std::string& description() const { return spec_.description; }
  std::int64_t devices_per_node() const { return spec_.devices_per_node; }
  std::int64_t memory_bytes() const { return spec_.memory_bytes; }
  std::int64_t peak_bf16_flops() const { return spec_.peak_bf16_flops; }
  std::int64_t peak_fp32_flops() const { return spec_.peak_fp32_flops; }
  std::int64_t hbm_bytes_per_s() const { return spec_.hbm_bytes_per_s; }
  std::int64_t intra_node_bytes_per_s() const { return spec_.intra_node_bytes_per_s; }
  std::int64_t intra_node_latency_ns() const { return spec_.intra_node_latency_ns; }
  std::int64_t inter_node_bytes_per_s() const { return spec_.inter_node_bytes_per_s; }
  std::int64_t inter_node_latency_ns() const { return spec_.inter_node_latency_ns; }
  std::int64_t nics_per_node() const { return spec_.nics_per_node; }
  std::int64_t nvls_permille() const { return spec_.nvls_permille; }
  CollectiveModel collectives() const { return spec_.collectives; }
  // nullptr when the hardware carries no measured figures.
  const Calibration* calibration() const {
    return spec_.calibration ? &*spec_.calibration : nullptr;
  }
  // nullptr when the hardware carries no per-op compute figures.
  const ComputeProfile* compute_profile() const {
    return spec_.compute_profile ? &*spec_.compute_profile : nullptr;
  }

  friend bool operator==(const Hardware&, const Hardware&) = default;

 private:
  explicit Hardware(HardwareSpec spec) : spec_(std::move(spec)) {}
  HardwareSpec spec_;
};

// Several lines: every field with its value in human units (GiB, TFLOP/s, GB/s, us).
std::string to_string(const Hardware& hardware);
std::ostream& operator<<(std::ostream& os, const Hardware& hardware);

}  // namespace fsdp
