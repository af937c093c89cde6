// SPDX-License-Identifier: Apache-2.0
// The basic cost models of the simulator (docs/design/simulator.md gives the formulas and their
// sources): ring alpha-beta collectives per mesh axis with nccl-tests' bus-bandwidth factors, and
// compute ops as max(FLOPs / (peak x efficiency), bytes / (HBM bandwidth x efficiency)). Every
// duration is rounded up to whole picoseconds exactly once, here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/hardware/hardware.h"
#include "core/mesh/device_mesh.h"
#include "core/schedule/op.h"
#include "sim/engine/sim_time.h"

namespace fsdp::sim {

// Achieved fractions of the datasheet peaks. Defaults are modelling assumptions (documented).
struct CostOptions {
  double forward_efficiency = 0.5;    // of peak math, matmul-heavy forward
  double backward_efficiency = 0.5;   // backward
  double recompute_efficiency = 0.5;  // recomputed forward
  double elementwise_efficiency = 0.5;  // math of grad copy, cast and optimizer step
  double memory_efficiency = 0.8;     // of HBM bandwidth, for every compute op's memory term
  double link_efficiency = 1.0;       // of the link bandwidth, for collectives
};

// The link a mesh axis's collectives run over.
struct AxisLink {
  std::int64_t group_size = 1;       // ranks per axis group
  bool inter_node = false;           // some group spans two nodes
  std::int64_t bytes_per_s = 0;      // per device, per direction
  std::int64_t latency_ns = 0;       // per ring step
  friend bool operator==(const AxisLink&, const AxisLink&) = default;
};

// One entry per mesh axis. Ranks are placed node-major (rank r on node r / devices_per_node) and
// numbered row-major over the mesh (last axis fastest); an axis whose group of any rank spans two
// nodes uses the inter-node figures, otherwise the intra-node ones.
std::vector<AxisLink> axis_links(const DeviceMesh& mesh, const Hardware& hardware);

struct CollectiveCost {
  SimDuration duration;
  double bus_bytes = 0;  // nccl-tests "bus" bytes: what crosses each ring link
};

// A ring collective over `link` moving `max_member_elements` per member (uneven members padded
// to the largest) of `dtype`: alpha * (n - 1) * steps + bus_bytes / (bandwidth * efficiency),
// where bus_bytes is (n - 1) / n of the full buffer for all-gather and reduce-scatter (steps 1)
// and 2 (n - 1) / n of it for all-reduce (steps 2). A group of one costs nothing.
CollectiveCost collective_cost(OpKind kind, std::int64_t max_member_elements, DType dtype,
                               const AxisLink& link, const CostOptions& options);

// A compute op (is_compute(op.kind)): max of its math time at the peak of its dtype (fp32 peak
// for fp32, the bf16 tensor peak otherwise) and its memory time; zero for other ops.
SimDuration compute_cost(const Op& op, const Hardware& hardware, const CostOptions& options);

// Seconds to picoseconds, rounded up; FSDP_CHECKs that the value fits SimDuration.
SimDuration duration_from_seconds(double seconds);

}  // namespace fsdp::sim
