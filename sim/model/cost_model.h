// SPDX-License-Identifier: Apache-2.0
// The basic cost models of the simulator (docs/design/simulator.md gives the formulas and their
// sources): collectives per mesh axis, either as NCCL runs them (rings with channels over the
// node's NICs, trees, NVLS; LL, LL128 and Simple protocols, the fastest per call, after NCCL's
// tuning model) or as ring alpha-beta with nccl-tests' bus-bandwidth factors, and
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
  // a ring step is latency- and protocol-bound), under both collective models; 0 = off.
  std::int64_t min_message_bytes = 0;
  UnevenCollective uneven = UnevenCollective::kPadToMax;
  // Units' forward, backward and recompute priced kernel by kernel (sim/model/kernel_cost.h) on
  // hardware with a compute profile; false: from their FLOPs with the efficiencies above.
  bool per_op_compute = true;
  friend bool operator==(const CostOptions&, const CostOptions&) = default;
};

// The link classes a collective's flow can occupy (LinkSharing shares each per device).
inline constexpr std::uint8_t kNvlinkLink = 1;   // the device's NVLink ports
inline constexpr std::uint8_t kNetworkLink = 2;  // the node's NICs

// The link a mesh axis's collectives run over.
struct AxisLink {
  std::int64_t group_size = 1;       // ranks per axis group
  bool inter_node = false;           // some group spans two nodes
  // The ring's bandwidth per device, per direction: alpha-beta, the link's; NCCL, the line rate
  // of its bottleneck, min(nvlink_bytes_per_s if ranks_per_node > 1, nic_bytes_per_s if nodes > 1).
  std::int64_t bytes_per_s = 0;
  std::int64_t latency_ns = 0;  // per ring step (alpha-beta)
  // Measured collective times on groups of group_size (the hardware's calibration): when a curve
  // of an op's kind is here, it replaces the ring formula (docs/design/fidelity.md).
  std::vector<CollectiveCurve> measured = {};
  CollectiveModel model = CollectiveModel::kAlphaBeta;
  std::int64_t nodes = 1;               // most nodes one group spans
  std::int64_t ranks_per_node = 1;      // fewest members of one group on one of its nodes (k)
  std::int64_t nvlink_bytes_per_s = 0;  // NVLink line rate per device, per direction
  // The group's share of its nodes' NICs (line rate): nics x per-NIC x k / devices_per_node, as
  // devices_per_node / k groups of the axis cross each node's NICs at once.
  std::int64_t nic_bytes_per_s = 0;
  std::int64_t nvls_permille = 0;  // NVLink SHARP efficiency; 0: none
  // The link class its flows occupy under contention: kNetworkLink when a group spans nodes (the
  // NICs, which every axis crossing nodes shares), kNvlinkLink otherwise.
  std::uint8_t flow_links = kNvlinkLink;
  friend bool operator==(const AxisLink&, const AxisLink&) = default;
};

// One entry per mesh axis. Ranks are placed node-major (rank r on node r / devices_per_node) and
// numbered row-major over the mesh (last axis fastest); an axis whose group of any rank spans two
// nodes uses the inter-node figures, otherwise the intra-node ones. Under the NCCL model the
// nodes and members per node of every group give the NIC share and the bottleneck.
std::vector<AxisLink> axis_links(const DeviceMesh& mesh, const Hardware& hardware);

// The algorithm and protocol NCCL's tuner would pick (kRing / kSimple under alpha-beta).
enum class NcclAlgorithm : std::uint8_t { kRing, kTree, kNvls };
enum class NcclProtocol : std::uint8_t { kLl, kLl128, kSimple };
std::string_view to_string(NcclAlgorithm algorithm);  // "ring", "tree", "nvls"
std::string_view to_string(NcclProtocol protocol);    // "LL", "LL128", "Simple"

struct CollectiveCost {
  SimDuration duration;  // latency + transfer
  SimDuration latency;   // the alpha term: not shared with other collectives
  SimDuration transfer;  // the bandwidth term at the full link rate: shared under contention
  double bus_bytes = 0;  // nccl-tests "bus" bytes: what crosses each ring link
  bool tree = false;     // an all-reduce costed with the tree algorithm
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
};

// A collective over `link` moving `max_member_elements` per member (uneven members padded to the
// largest) of `dtype`. Ring: alpha * (n - 1) * steps + bus_bytes / (bandwidth * efficiency),
// where bus_bytes is (n - 1) / n of the full buffer for all-gather and reduce-scatter (steps 1)
// and 2 (n - 1) / n of it for all-reduce (steps 2). Tree all-reduce: alpha * 2 ceil(log2 n) +
// 2 * buffer / (bandwidth * efficiency). Per-step messages below options.min_message_bytes cost
// as that size. A group of one costs nothing. With a measured curve of `kind` on the link, the
// duration is the curve's time at the member payload (curve_ns); its latency is the curve's
// smallest-size time and the rest is transfer. Error (kOutOfRange): a term beyond 2^63 ps.
// Under the NCCL model (link.model) the call costs NCCL's predicted time for the fastest
// (algorithm, protocol) instead: latency(algorithm, protocol, n, nodes, k) + bytes / algorithm
// bandwidth, formulas in docs/design/simulator.md, "Collectives as NCCL runs them".
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

// What nccl-tests would report for one call of `kind` over `gpus` GPUs (one mesh axis, ranks
// placed node-major) moving `bytes`, nccl-tests' size: the all-reduce buffer, the all-gather's
// output, the reduce-scatter's input. busbw = algbw x (n - 1) / n (all-gather, reduce-scatter) or
// x 2 (n - 1) / n (all-reduce), algbw = bytes / time (nccl-tests' doc/PERFORMANCE.md).
struct BusBandwidth {
  double bus_bytes_per_s = 0;
  double alg_bytes_per_s = 0;
  SimDuration time;
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
};
// Errors (kInvalidArgument): kind not a collective, gpus < 2 or beyond the mesh's int32 ranks,
// bytes < gpus (an all-gather or reduce-scatter needs a byte per member); a duration out of range.
Expected<BusBandwidth> predicted_bus_bandwidth(OpKind kind, std::int64_t bytes, std::int64_t gpus,
                                               const Hardware& hardware,
                                               const CostOptions& options);

// An all-to-all over `link` (expert parallelism's token dispatch and combine): each of the n
// members sends `bytes_per_member` in all, bytes_per_member / n to every member, itself
// included. NCCL runs it as grouped point-to-point sends and receives, so the member's NVLink
// and its own NIC work at once and it cannot aggregate the node's other NICs (NVIDIA/nccl-tests
// #267, #130): with k members on its node, intra = bytes x (k - 1) / n at NVLink's achieved
// rate, inter = bytes x (n - k) / n at one GPU's share of its node's NICs at their achieved
// rate, and the duration is the link's latency plus max(intra, inter)
// (docs/design/simulator.md, "All-to-all"). A group of one costs nothing. Errors: bytes < 0
// (kInvalidArgument); a duration beyond 2^63 ps (kOutOfRange).
struct AllToAllCost {
  SimDuration duration;
  SimDuration latency;
  SimDuration transfer;
  double intra_node_bytes = 0;  // what one member sends to the members on its node
  double inter_node_bytes = 0;  // and to the members on other nodes
};
Expected<AllToAllCost> all_to_all_cost(std::int64_t bytes_per_member, const AxisLink& link);

// What nccl-tests' alltoall_perf would report for one all-to-all over `gpus` GPUs (ranks placed
// node-major) of `bytes` per rank (its size column): algbw = bytes / time, busbw = algbw x
// (n - 1) / n. Errors as predicted_bus_bandwidth.
Expected<BusBandwidth> predicted_all_to_all_bus_bandwidth(std::int64_t bytes, std::int64_t gpus,
                                                          const Hardware& hardware);

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
