// SPDX-License-Identifier: Apache-2.0
// The basic cost models of the simulator (docs/design/simulator.md gives the formulas and their
// sources): ring alpha-beta collectives per mesh axis with nccl-tests' bus-bandwidth factors, and
// compute ops as max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x efficiency)). Every
// duration is rounded up to whole picoseconds exactly once, here. A duration beyond simulated
// time's range (2^63 ps) is an error (kOutOfRange), never a wrapped value (issue 16).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/base/expected.h"
#include "core/hardware/calibration.h"
#include "core/hardware/hardware.h"
#include "core/mesh/device_mesh.h"
#include "core/schedule/op.h"
#include "sim/engine/sim_time.h"

namespace fsdp::sim {

// How all-reduces are costed: the ring, the (double binary) tree, or per call whichever of the
// two is faster, as NCCL's tuner picks the algorithm with the lowest predicted time.
enum class AllReduceAlgorithm : std::uint8_t { kRing, kTree, kAuto };
// How all-gathers and reduce-scatters with unequal member counts are costed: padded to the
// largest member (NCCL 2.28 has no all-gather-v), or as a group of per-member broadcasts
// (reduces) that move the real counts.
enum class UnevenCollective : std::uint8_t { kPadToMax, kGroupedBroadcast };

std::string_view to_string(AllReduceAlgorithm algorithm);  // "ring", "tree", "auto"
std::string_view to_string(UnevenCollective uneven);       // "padded", "broadcast"

// Achieved fractions of the datasheet peaks and the collective-algorithm knobs. Defaults are
// modelling assumptions (documented).
struct CostOptions {
  double forward_efficiency = 0.5;    // of peak math, matmul-heavy forward
  double backward_efficiency = 0.5;   // backward
  double recompute_efficiency = 0.5;  // recomputed forward
  double elementwise_efficiency = 0.5;  // math of grad copy, cast and optimizer step
  double memory_efficiency = 0.8;     // of HBM bandwidth, for every compute op's memory term
  double link_efficiency = 1.0;       // of the link bandwidth, for collectives
  // Compute runs this many times slower while a collective of the same device is in flight (the
  // NCCL kernels occupy SMs); 1 = no slowdown.
  double sm_slowdown = 1.0;
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kAuto;
  // Per-step messages smaller than this cost as much bandwidth time as one of this size (below it
  // a ring step is latency- and protocol-bound); 0 = off.
  std::int64_t min_message_bytes = 0;
  UnevenCollective uneven = UnevenCollective::kPadToMax;
  // Units' forward, backward and recompute priced kernel by kernel (sim/model/kernel_cost.h) on
  // hardware with a compute profile; false: from their FLOPs with the efficiencies above.
  bool per_op_compute = true;
  friend bool operator==(const CostOptions&, const CostOptions&) = default;
};

// The link a mesh axis's collectives run over.
struct AxisLink {
  std::int64_t group_size = 1;       // ranks per axis group
  bool inter_node = false;           // some group spans two nodes
  std::int64_t bytes_per_s = 0;      // per device, per direction
  std::int64_t latency_ns = 0;       // per ring step
  // Measured collective times on groups of group_size (the hardware's calibration): when a curve
  // of an op's kind is here, it replaces the ring formula (docs/design/fidelity.md).
  std::vector<CollectiveCurve> measured = {};
  friend bool operator==(const AxisLink&, const AxisLink&) = default;
};

// One entry per mesh axis. Ranks are placed node-major (rank r on node r / devices_per_node) and
// numbered row-major over the mesh (last axis fastest); an axis whose group of any rank spans two
// nodes uses the inter-node figures, otherwise the intra-node ones.
std::vector<AxisLink> axis_links(const DeviceMesh& mesh, const Hardware& hardware);

struct CollectiveCost {
  SimDuration duration;  // latency + transfer
  SimDuration latency;   // the alpha term: not shared with other collectives
  SimDuration transfer;  // the bandwidth term at the full link rate: shared under contention
  double bus_bytes = 0;  // nccl-tests "bus" bytes: what crosses each ring link
  bool tree = false;     // an all-reduce costed with the tree algorithm
};

// A collective over `link` moving `max_member_elements` per member (uneven members padded to the
// largest) of `dtype`. Ring: alpha * (n - 1) * steps + bus_bytes / (bandwidth * efficiency),
// where bus_bytes is (n - 1) / n of the full buffer for all-gather and reduce-scatter (steps 1)
// and 2 (n - 1) / n of it for all-reduce (steps 2). Tree all-reduce: alpha * 2 ceil(log2 n) +
// 2 * buffer / (bandwidth * efficiency). Per-step messages below options.min_message_bytes cost
// as that size. A group of one costs nothing. With a measured curve of `kind` on the link, the
// duration is the curve's time at the member payload (curve_ns); its latency is the curve's
// smallest-size time and the rest is transfer. Error (kOutOfRange): a term beyond 2^63 ps.
Expected<CollectiveCost> collective_cost(OpKind kind, std::int64_t max_member_elements,
                                         DType dtype, const AxisLink& link,
                                         const CostOptions& options);

// The same for a collective whose members move `member_elements` (one entry per group member;
// empty or all equal: every member moves `elements`). With UnevenCollective::kGroupedBroadcast an
// uneven all-gather or reduce-scatter is costed as a group of n broadcasts (reduces) whose links
// carry (n - 1) / n of the real total, with the latency of one ring pass. A measured curve is read
// at the members' mean payload (MPI's v-collectives move the real counts). Errors as above.
Expected<CollectiveCost> uneven_collective_cost(OpKind kind, std::int64_t elements,
                                                std::span<const std::int64_t> member_elements,
                                                DType dtype, const AxisLink& link,
                                                const CostOptions& options);

// A compute op (is_compute(op.kind)): max of its math time at the peak of its dtype (fp32 peak
// for fp32, the bf16 tensor peak otherwise) and its memory time; zero for other ops. With a
// calibrated rate for the op's kind: flops / flops_per_s + mem_bytes / bytes_per_s (measured
// rates already include the efficiencies, which are then not applied). Error (kOutOfRange): a
// duration beyond 2^63 ps.
Expected<SimDuration> compute_cost(const Op& op, const Hardware& hardware,
                                   const CostOptions& options);

// `options` with the hardware's measured compute slowdown during communication as sm_slowdown
// (unchanged when the hardware has no calibration).
CostOptions calibrated_cost_options(CostOptions options, const Hardware& hardware);

// Seconds to picoseconds, rounded up. Error (kOutOfRange) when the value is negative, NaN or at
// least 2^63 ps: "a duration of 3e+07 s is beyond the range of simulated time (...)".
Expected<SimDuration> duration_from_seconds(double seconds);

}  // namespace fsdp::sim
