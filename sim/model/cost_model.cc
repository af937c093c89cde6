// SPDX-License-Identifier: Apache-2.0
// Formulas: docs/design/simulator.md, "Cost models".
#include "sim/model/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/base/checked_math.h"
#include "core/base/strings.h"

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
    // The bases are the ranks whose coordinate on this axis is 0: [hi, hi + stride) for hi a
    // multiple of stride * n (visited in increasing order, as a scan of every rank would).
    for (std::int64_t hi = 0; hi < mesh.size() && !inter && n > 1; hi += stride * n) {
      for (std::int64_t base = hi; base < hi + stride && !inter; ++base) {
        inter = base / per_node != (base + (n - 1) * stride) / per_node;
      }
    }
    AxisLink link;
    link.group_size = n;
    link.inter_node = inter;
    link.bytes_per_s = inter ? hardware.inter_node_bytes_per_s() : hardware.intra_node_bytes_per_s();
    link.latency_ns = inter ? hardware.inter_node_latency_ns() : hardware.intra_node_latency_ns();
    if (const Calibration* c = hardware.calibration(); c != nullptr && n > 1) {
      for (const CollectiveCurve& curve : c->collectives) {
        if (curve.ranks == n) {
          link.measured.push_back(curve);
        }
      }
    }
    links.push_back(link);
  }
  return links;
}

namespace {

Error duration_out_of_range(std::string_view what) {
  return Error(ErrorCode::kOutOfRange,
               str_cat(what, " is beyond the range of simulated time (2^63 ps, about 106 days)"));
}

}  // namespace

Expected<SimDuration> duration_from_seconds(double seconds) {
  const double ps = std::ceil(seconds * 1e12);
  // 2^63 is exactly representable; every double below it converts to int64 exactly. NaN fails
  // both comparisons.
  if (!(ps >= 0.0 && ps < 9223372036854775808.0)) {
    return duration_out_of_range(str_cat("a duration of ", seconds, " s"));
  }
  return SimDuration::ps(static_cast<std::int64_t>(ps));
}

std::string_view to_string(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kRing:
      return "ring";
    case AllReduceAlgorithm::kTree:
      return "tree";
    case AllReduceAlgorithm::kAuto:
      break;
  }
  return "auto";
}

std::string_view to_string(UnevenCollective uneven) {
  return uneven == UnevenCollective::kPadToMax ? "padded" : "broadcast";
}

namespace {

// ceil(log2(n)) for n >= 1.
std::int64_t ceil_log2(std::int64_t n) {
  std::int64_t k = 0;
  while ((std::int64_t{1} << k) < n) {
    ++k;
  }
  return k;
}

// `steps` sequential latencies of `latency_ns` each.
Expected<SimDuration> latency_of(std::int64_t latency_ns, std::int64_t steps) {
  std::int64_t ps = 0;
  if (!checked_mul(latency_ns, steps, &ps) || !checked_mul(ps, 1000, &ps)) {
    return duration_out_of_range(
        str_cat("a latency of ", steps, " steps of ", latency_ns, " ns"));
  }
  return SimDuration::ps(ps);
}

// latency + transfer.
Expected<SimDuration> sum_of(SimDuration a, SimDuration b) {
  std::int64_t ps = 0;
  if (!checked_add(a.ps(), b.ps(), &ps)) {
    return duration_out_of_range(str_cat("a duration of ", a.seconds(), " s + ", b.seconds(), " s"));
  }
  return SimDuration::ps(ps);
}

// A ring pass: `hops` sequential steps of `chunk_bytes` each on every link, `bus_bytes` in all
// (passed in so that its rounding is the caller's formula, bit for bit).
Expected<CollectiveCost> ring(std::int64_t hops, double chunk_bytes, double bus_bytes,
                              double bandwidth, const AxisLink& link, const CostOptions& options) {
  CollectiveCost cost;
  cost.bus_bytes = bus_bytes;
  const double min_bytes = static_cast<double>(options.min_message_bytes);
  const double charged =
      chunk_bytes >= min_bytes ? bus_bytes : min_bytes * static_cast<double>(hops);
  FSDP_TRY(cost.latency, latency_of(link.latency_ns, hops));
  FSDP_TRY(cost.transfer, duration_from_seconds(charged / bandwidth));
  FSDP_TRY(cost.duration, sum_of(cost.latency, cost.transfer));
  return cost;
}

// The link's measured curve of `kind`, or nullptr.
const CollectiveCurve* measured_curve(const AxisLink& link, OpKind kind) {
  for (const CollectiveCurve& c : link.measured) {
    if (c.kind == kind) {
      return &c;
    }
  }
  return nullptr;
}

// A call moving `member_bytes` on a measured curve; bus bytes as nccl-tests counts them.
Expected<CollectiveCost> measured_cost(const CollectiveCurve& curve, OpKind kind,
                                       double member_bytes, std::int64_t n) {
  CollectiveCost cost;
  const double nd = static_cast<double>(n);
  cost.bus_bytes = kind == OpKind::kAllReduce ? 2.0 * (nd - 1.0) / nd * member_bytes
                                              : (nd - 1.0) * member_bytes;
  const double total_ns = curve_ns(curve, member_bytes);
  const double latency_ns = std::min(total_ns, static_cast<double>(curve.points.front().ns));
  FSDP_TRY(cost.latency, duration_from_seconds(latency_ns * 1e-9));
  FSDP_TRY(cost.transfer, duration_from_seconds((total_ns - latency_ns) * 1e-9));
  FSDP_TRY(cost.duration, sum_of(cost.latency, cost.transfer));
  return cost;
}

}  // namespace

CostOptions calibrated_cost_options(CostOptions options, const Hardware& hardware) {
  if (const Calibration* c = hardware.calibration()) {
    options.sm_slowdown = static_cast<double>(c->compute_slowdown_permille) / 1000.0;
  }
  return options;
}

Expected<CollectiveCost> collective_cost(OpKind kind, std::int64_t max_member_elements,
                                         DType dtype, const AxisLink& link,
                                         const CostOptions& options) {
  const std::int64_t n = link.group_size;
  if (n <= 1 || max_member_elements <= 0) {
    return CollectiveCost();
  }
  const double element_bytes = static_cast<double>(dtype_bytes(dtype));
  if (const CollectiveCurve* curve = measured_curve(link, kind)) {
    return measured_cost(*curve, kind, static_cast<double>(max_member_elements) * element_bytes,
                         n);
  }
  const double nd = static_cast<double>(n);
  const double bandwidth = static_cast<double>(link.bytes_per_s) * options.link_efficiency;
  if (kind != OpKind::kAllReduce) {
    // The full buffer is n members' (padded) shards; each of the n - 1 ring steps moves one.
    return ring(n - 1, static_cast<double>(max_member_elements) * element_bytes,
                (nd - 1.0) * static_cast<double>(max_member_elements) * element_bytes, bandwidth,
                link, options);
  }
  // All-reduce over the whole buffer S: the ring is a reduce-scatter then an all-gather, 2(n-1)
  // steps of S/n; the tree reduces up and broadcasts down a pipelined binary tree, 2 ceil(log2 n)
  // steps and S through each node's link in each direction (NCCL's tuner converts tree bus
  // bandwidth to algorithm bandwidth with a factor 1/2).
  const double buffer = static_cast<double>(max_member_elements) * element_bytes;
  FSDP_TRY(CollectiveCost r,
           ring(2 * (n - 1), buffer / nd,
                2.0 * (nd - 1.0) / nd * static_cast<double>(max_member_elements) * element_bytes,
                bandwidth, link, options));
  if (options.all_reduce == AllReduceAlgorithm::kRing) {
    return r;
  }
  CollectiveCost t;
  t.tree = true;
  t.bus_bytes = r.bus_bytes;  // nccl-tests reports every all-reduce with 2(n-1)/n
  FSDP_TRY(t.latency, latency_of(link.latency_ns, 2 * ceil_log2(n)));
  FSDP_TRY(t.transfer,
           duration_from_seconds(
               2.0 * std::max(buffer, static_cast<double>(options.min_message_bytes)) / bandwidth));
  FSDP_TRY(t.duration, sum_of(t.latency, t.transfer));
  if (options.all_reduce == AllReduceAlgorithm::kTree) {
    return t;
  }
  // kAuto: NCCL uses trees across nodes only; inside a node the ring (a chain) is kept.
  return link.inter_node && t.duration < r.duration ? t : r;
}

Expected<CollectiveCost> uneven_collective_cost(OpKind kind, std::int64_t elements,
                                                std::span<const std::int64_t> member_elements,
                                                DType dtype, const AxisLink& link,
                                                const CostOptions& options) {
  if (member_elements.empty()) {
    return collective_cost(kind, elements, dtype, link, options);
  }
  const std::int64_t max_elements =
      std::max(elements, *std::max_element(member_elements.begin(), member_elements.end()));
  const bool uneven = std::any_of(member_elements.begin(), member_elements.end(),
                                  [&](std::int64_t e) { return e != member_elements.front(); });
  if (const CollectiveCurve* curve = measured_curve(link, kind);
      curve != nullptr && uneven && kind != OpKind::kAllReduce && link.group_size > 1) {
    double total = 0.0;
    for (std::int64_t e : member_elements) {
      total += static_cast<double>(e);
    }
    return measured_cost(*curve, kind,
                         total / static_cast<double>(member_elements.size()) *
                             static_cast<double>(dtype_bytes(dtype)),
                         link.group_size);
  }
  if (!uneven || kind == OpKind::kAllReduce ||
      options.uneven == UnevenCollective::kPadToMax || link.group_size <= 1) {
    return collective_cost(kind, max_elements, dtype, link, options);
  }
  // Grouped broadcasts: member i's s_i bytes cross every ring link but the one into i, so a link
  // carries (n-1)/n of the total on average; the group runs as one ring pass of latency.
  // In double, as the members' total may pass int64 (each member's count is in range).
  double total = 0.0;
  for (std::int64_t e : member_elements) {
    total += static_cast<double>(e);
  }
  const double bandwidth = static_cast<double>(link.bytes_per_s) * options.link_efficiency;
  const double n = static_cast<double>(link.group_size);
  const double chunk =
      total * static_cast<double>(dtype_bytes(dtype)) / n;
  return ring(link.group_size - 1, chunk, (n - 1.0) * chunk, bandwidth, link, options);
}

Expected<SimDuration> compute_cost(const Op& op, const Hardware& hardware,
                                   const CostOptions& options) {
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
    case OpKind::kGradAccumulate:
    case OpKind::kCast:
    case OpKind::kOptimizerStep:
      break;
    default:
      return SimDuration();
  }
  if (const Calibration* c = hardware.calibration()) {
    if (const ComputeRate* rate = find_compute_rate(*c, op.kind)) {
      double seconds = 0.0;
      if (rate->flops_per_s > 0) {
        seconds += static_cast<double>(op.flops) / static_cast<double>(rate->flops_per_s);
      }
      if (rate->bytes_per_s > 0) {
        seconds += static_cast<double>(op.mem_bytes) / static_cast<double>(rate->bytes_per_s);
      }
      return duration_from_seconds(seconds);
    }
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
