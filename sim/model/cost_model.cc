// SPDX-License-Identifier: Apache-2.0
// Formulas: docs/design/simulator.md, "Cost models".
#include "sim/model/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/base/check.h"

namespace fsdp::sim {

std::vector<AxisLink> axis_links(const DeviceMesh& mesh, const Hardware& hardware) {
  const std::int64_t per_node = hardware.devices_per_node();
  std::vector<AxisLink> links;
  links.reserve(static_cast<std::size_t>(mesh.ndim()));
  for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
    std::int64_t stride = 1;
    for (std::int64_t b = a + 1; b < mesh.ndim(); ++b) {
      stride *= mesh.axis_size(b);
    }
    const std::int64_t n = mesh.axis_size(a);
    bool inter = false;
    // A group is {base + k * stride}; its members are increasing, so it spans nodes exactly when
    // its first and last members sit on different nodes.
    for (std::int64_t base = 0; base < mesh.size() && !inter && n > 1; ++base) {
      if ((base / stride) % n != 0) {
        continue;
      }
      inter = base / per_node != (base + (n - 1) * stride) / per_node;
    }
    AxisLink link;
    link.group_size = n;
    link.inter_node = inter;
    link.bytes_per_s = inter ? hardware.inter_node_bytes_per_s() : hardware.intra_node_bytes_per_s();
    link.latency_ns = inter ? hardware.inter_node_latency_ns() : hardware.intra_node_latency_ns();
    links.push_back(link);
  }
  return links;
}

SimDuration duration_from_seconds(double seconds) {
  const double ps = std::ceil(seconds * 1e12);
  FSDP_CHECK(ps >= 0 && ps < 9.2e18) << "duration of " << seconds << " s is out of range";
  return SimDuration::ps(static_cast<std::int64_t>(ps));
}

CollectiveCost collective_cost(OpKind kind, std::int64_t max_member_elements, DType dtype,
                               const AxisLink& link, const CostOptions& options) {
  CollectiveCost cost;
  const std::int64_t n = link.group_size;
  if (n <= 1 || max_member_elements <= 0) {
    return cost;
  }
  const double element_bytes = static_cast<double>(dtype_bytes(dtype));
  const double nd = static_cast<double>(n);
  std::int64_t steps = 1;
  if (kind == OpKind::kAllReduce) {
    // The op's elements are the whole buffer; reduce-scatter then all-gather over it.
    steps = 2;
    cost.bus_bytes = 2.0 * (nd - 1.0) / nd * static_cast<double>(max_member_elements) *
                     element_bytes;
  } else {
    // The full buffer is n members' (padded) shards; (n-1)/n of it crosses each link.
    cost.bus_bytes = (nd - 1.0) * static_cast<double>(max_member_elements) * element_bytes;
  }
  const double bandwidth = static_cast<double>(link.bytes_per_s) * options.link_efficiency;
  const SimDuration alpha = SimDuration::ns(link.latency_ns * (n - 1) * steps);
  cost.duration = alpha + duration_from_seconds(cost.bus_bytes / bandwidth);
  return cost;
}

SimDuration compute_cost(const Op& op, const Hardware& hardware, const CostOptions& options) {
  double efficiency = options.elementwise_efficiency;
  switch (op.kind) {
    case OpKind::kForward:
      efficiency = options.forward_efficiency;
      break;
    case OpKind::kBackward:
      efficiency = options.backward_efficiency;
      break;
    case OpKind::kRecompute:
      efficiency = options.recompute_efficiency;
      break;
    case OpKind::kGradCopy:
    case OpKind::kCast:
    case OpKind::kOptimizerStep:
      break;
    default:
      return SimDuration();
  }
  const double peak = static_cast<double>(
      op.dtype == DType::kFp32 ? hardware.peak_fp32_flops() : hardware.peak_bf16_flops());
  const double math = static_cast<double>(op.flops) / (peak * efficiency);
  const double memory = static_cast<double>(op.mem_bytes) /
                        (static_cast<double>(hardware.hbm_bytes_per_s()) *
                         options.memory_efficiency);
  return duration_from_seconds(std::max(math, memory));
}

}  // namespace fsdp::sim
