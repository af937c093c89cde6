// SPDX-License-Identifier: Apache-2.0
// Formulas: docs/design/simulator.md, "Cost models".
#include "sim/model/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/base/checked_math.h"
#include "core/base/strings.h"

namespace fsdp::sim {

namespace {

// int64 of a non-negative double, saturating (for bandwidths derived from user figures).
std::int64_t saturate(double v) {
  return v >= 9.2e18 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(v);
}

}  // namespace

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
    // A group is {base + j * stride}; its members are increasing, so its nodes are runs of
    // consecutive members. The bases are the ranks whose coordinate on this axis is 0: [hi, hi +
    // stride) for hi a multiple of stride * n. Every group is visited (O(mesh size) per axis):
    // the most nodes one group spans and the shortest run of members on one node.
    std::int64_t nodes = 1;
    std::int64_t per_node_members = n;
    for (std::int64_t hi = 0; hi < mesh.size() && n > 1; hi += stride * n) {
      for (std::int64_t base = hi; base < hi + stride; ++base) {
        std::int64_t group_nodes = 1;
        std::int64_t run = 1;
        std::int64_t node = base / per_node;
        for (std::int64_t j = 1; j < n; ++j) {
          const std::int64_t next = (base + j * stride) / per_node;
          if (next == node) {
            ++run;
            continue;
          }
          per_node_members = std::min(per_node_members, run);
          ++group_nodes;
          run = 1;
          node = next;
        }
        per_node_members = std::min(per_node_members, run);
        nodes = std::max(nodes, group_nodes);
      }
    }
    const bool inter = nodes > 1;
    AxisLink link;
    link.group_size = n;
    link.inter_node = inter;
    link.latency_ns = inter ? hardware.inter_node_latency_ns() : hardware.intra_node_latency_ns();
    link.model = hardware.collectives();
    link.nodes = nodes;
    link.ranks_per_node = n > 1 ? per_node_members : 1;
    link.nvlink_bytes_per_s = hardware.intra_node_bytes_per_s();
    link.nic_bytes_per_s =
        saturate(static_cast<double>(hardware.nics_per_node()) *
                 static_cast<double>(hardware.inter_node_bytes_per_s()) *
                 static_cast<double>(link.ranks_per_node) / static_cast<double>(per_node));
    link.nvls_permille = hardware.nvls_permille();
    // A flow occupies one link class: the NICs when its groups cross nodes, NVLink otherwise.
    // An inter-node ring also hops over NVLink between a node's members, but NVLink binds it only
    // when its NIC share exceeds NVLink's, i.e. when a group holds most of a node (on the 8-GPU
    // presets only k = devices_per_node), and then no other axis has two members on that node to
    // contend with it there (docs/design/simulator.md, "Link contention").
    link.flow_links = inter ? kNetworkLink : kNvlinkLink;
    if (link.model == CollectiveModel::kAlphaBeta) {
      link.bytes_per_s =
          inter ? hardware.inter_node_bytes_per_s() : hardware.intra_node_bytes_per_s();
    } else {
      const bool nvlink = link.ranks_per_node > 1 || !inter;
      link.bytes_per_s = inter ? (nvlink ? std::min(link.nvlink_bytes_per_s, link.nic_bytes_per_s)
                                         : link.nic_bytes_per_s)
                               : link.nvlink_bytes_per_s;
    }
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

std::string_view to_string(NcclAlgorithm algorithm) {
  switch (algorithm) {
    case NcclAlgorithm::kTree:
      return "tree";
    case NcclAlgorithm::kNvls:
      return "nvls";
    case NcclAlgorithm::kRing:
      break;
  }
  return "ring";
}

std::string_view to_string(NcclProtocol protocol) {
  switch (protocol) {
    case NcclProtocol::kLl:
      return "LL";
    case NcclProtocol::kLl128:
      return "LL128";
    case NcclProtocol::kSimple:
      break;
  }
  return "Simple";
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

// NCCL's tuning model (src/graph/tuning.cc of NCCL 2.28: ncclTopoTuneModel and
// ncclTopoGetAlgoTime), with the topology figures NCCL's graph search would find replaced by the
// hardware's (docs/design/simulator.md, "Collectives as NCCL runs them"). Latencies in us,
// bandwidths in GB/s, as there.
namespace nccl {

constexpr std::size_t kLl = 0;
constexpr std::size_t kLl128 = 1;
constexpr std::size_t kSimple = 2;
constexpr std::size_t kTree = 0;
constexpr std::size_t kRing = 1;

// baseLatencies, and hwLatencies for NVLink and the network: {tree, ring} x {LL, LL128, Simple}.
constexpr double kBaseLat[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
constexpr double kNvlinkLat[2][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
constexpr double kNetLat[2][3] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
constexpr double kNvlsNvlinkLat = 25.0;  // NVLS / Simple over NVLink, no base latency
// getNetOverhead (x86 Intel hosts: 1 us per network post, 3 for Simple): the floor of an intra
// step of a ring that crosses nodes.
constexpr double kNetOverhead = 1.0;
// llMaxBws of the network rows (Intel hosts): 2 nodes, more than 2.
constexpr double kLlMaxBw2Nodes = 39.0;
constexpr double kLlMaxBwManyNodes = 20.4;
// The ring plateau: Simple all-reduce across nodes pays 1.4x its latency (compute capability >=
// 8.0).
constexpr double kRingPlateau = 1.4;
// NVLS channels (NCCL_NVLS_NCHANNELS' default): one of them is not used for data.
constexpr double kNvlsChannels = 16.0;
// treeCorrectionFactor: tree bandwidth per protocol at sizes 64 B x 2^i, i < 23.
// clang-format off
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0,  .9,  .8,  .7,  .7,  .7,  .7,  .6,  .5,  .4,  .4,  .5,  .6,  .7,  .8,  .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0,  .9,  .8,  .8,  .8,  .7,  .6,  .6,  .6,  .6,  .6,  .6,  .8,  .9,  .9,  .9,  .9, 1.0, 1.0},
    { .9,  .9,  .9,  .9,  .9,  .9,  .9,  .8,  .7,  .6,  .6,  .5,  .5,  .5,  .5,  .6,  .7,  .8,  .7,  .7,  .8,  .9,  .9}};
// clang-format on

// What NCCL's Simple protocol achieves of a link's line rate: NVLink 4 20.6 GB/s of 25 per link
// (NCCL's SM90_NVLINK_BW; ~370 of 450 GB/s measured, NVIDIA/nccl-tests#212), NDR 400 Gb/s NICs
// 47 of 50 GB/s (46-48 GB/s per NIC, NVIDIA/nccl-tests#290).
constexpr double kNvlinkEfficiency = 0.824;
constexpr double kNetworkEfficiency = 0.94;

// floor(log2(v)) for v >= 1, 0 below.
int log2i(double v) {
  int k = 0;
  while (v >= 2.0) {
    v /= 2.0;
    ++k;
  }
  return k;
}

struct Choice {
  double latency_us = 0.0;
  double transfer_us = 0.0;
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
};

// The fastest (algorithm, protocol) for a call of `bytes` (NCCL's nBytes: the all-reduce buffer,
// the all-gather's output, the reduce-scatter's input) over `link`.
Choice choose(OpKind kind, double bytes, const AxisLink& link, const CostOptions& options) {
  const double n = static_cast<double>(link.group_size);
  const double m = static_cast<double>(link.nodes);
  const double k = static_cast<double>(link.ranks_per_node);
  const bool multi_node = link.nodes > 1;
  const bool all_reduce = kind == OpKind::kAllReduce;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // The ring's Simple bus bandwidth: the bottleneck of the NVLink hops and the NIC share.
  const double nvlink = link.ranks_per_node > 1 || !multi_node
                            ? static_cast<double>(link.nvlink_bytes_per_s) * kNvlinkEfficiency
                            : kInf;
  const double network =
      multi_node ? static_cast<double>(link.nic_bytes_per_s) * kNetworkEfficiency : kInf;
  const double bw = std::min(nvlink, network) * options.link_efficiency * 1e-9;
  const double ll_max = !multi_node ? kInf : link.nodes == 2 ? kLlMaxBw2Nodes : kLlMaxBwManyNodes;
  const double nsteps = all_reduce ? 2.0 * (n - 1.0) : n - 1.0;
  const double inter_steps = !multi_node ? 0.0 : all_reduce ? 2.0 * (m - 1.0) : m - 1.0;
  const bool ring_only = !all_reduce || options.all_reduce == AllReduceAlgorithm::kRing;
  const bool tree_only = all_reduce && options.all_reduce == AllReduceAlgorithm::kTree;
  Choice best;
  double best_time = kInf;
  const auto consider = [&](NcclAlgorithm algorithm, std::size_t p, double latency, double algbw) {
    if (!(algbw > 0.0)) {
      return;
    }
    const double transfer = bytes / (1e3 * algbw);
    if (latency + transfer < best_time) {
      best_time = latency + transfer;
      best = Choice{latency, transfer, algorithm, static_cast<NcclProtocol>(p)};
    }
  };
  for (std::size_t p = 0; p < 3; ++p) {
    if (!tree_only) {
      double bus = bw;
      if (p == kLl) {
        bus = std::min(ll_max, bw * 0.5);
      } else if (p == kLl128) {
        bus = bw * 0.92;
      }
      double intra_lat = kNvlinkLat[kRing][p];
      if (multi_node) {
        intra_lat = std::max(intra_lat, kNetOverhead * (p == kSimple ? 3.0 : 1.0));
      }
      // One GPU per node: latencies are fully exposed (the tree's network latency).
      const double inter_lat = link.ranks_per_node == 1 ? kNetLat[kTree][p] : kNetLat[kRing][p];
      double latency =
          kBaseLat[kRing][p] + (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
      if (all_reduce && p == kSimple && multi_node && bytes / n >= 64.0) {
        latency *= kRingPlateau;
      }
      consider(NcclAlgorithm::kRing, p, latency, bus * n / nsteps);
    }
    if (!ring_only) {
      double bus = bw * 0.92;
      if (p == kLl) {
        bus = std::min(bus / 3.8, ll_max);
      } else if (p == kLl128) {
        bus *= multi_node ? 120.0 / 128.0 : 7.0 / 9.0;
      }
      double algbw = bus * 0.5;
      const int log_size = log2i(bytes / 64.0);
      if (bytes >= 64.0 && log_size < 23) {
        algbw *= kTreeCorrection[p][static_cast<std::size_t>(log_size)];
      }
      const double latency =
          kBaseLat[kTree][p] + 2.0 * ((k - 1.0) * kNvlinkLat[kTree][p] +
                                      static_cast<double>(log2i(m)) * kNetLat[kTree][p]);
      consider(NcclAlgorithm::kTree, p, latency, algbw);
    }
  }
  // NVLS all-reduce inside one node (NVLS across nodes needs CollNet; NVLS Tree is not modelled).
  if (all_reduce && options.all_reduce == AllReduceAlgorithm::kAuto && !multi_node &&
      link.nvls_permille > 0) {
    const double bus = static_cast<double>(link.nvlink_bytes_per_s) * kNvlinkEfficiency *
                       options.link_efficiency * 1e-9 * static_cast<double>(link.nvls_permille) /
                       1000.0 * (kNvlsChannels - 1.0) / kNvlsChannels * 2.0;
    consider(NcclAlgorithm::kNvls, kSimple, kNvlsNvlinkLat, bus * n / nsteps);
  }
  return best;
}

}  // namespace nccl

// A call under the NCCL model: the member payload is `member_bytes` (the all-reduce buffer, or
// one member's shard of an all-gather or reduce-scatter).
Expected<CollectiveCost> nccl_cost(OpKind kind, double member_bytes, const AxisLink& link,
                                   const CostOptions& options) {
  const double nd = static_cast<double>(link.group_size);
  const bool all_reduce = kind == OpKind::kAllReduce;
  const double bytes = all_reduce ? member_bytes : nd * member_bytes;
  nccl::Choice c = nccl::choose(kind, bytes, link, options);
  // Per-step messages (a ring chunk: bytes / n) below options.min_message_bytes cost as that size,
  // as in the alpha-beta ring.
  const double min_bytes = static_cast<double>(options.min_message_bytes);
  if (bytes / nd < min_bytes && bytes > 0.0) {
    c.transfer_us *= min_bytes * nd / bytes;
  }
  CollectiveCost cost;
  cost.bus_bytes = all_reduce ? 2.0 * (nd - 1.0) / nd * member_bytes : (nd - 1.0) * member_bytes;
  cost.algorithm = c.algorithm;
  cost.protocol = c.protocol;
  cost.tree = c.algorithm == NcclAlgorithm::kTree;
  FSDP_TRY(cost.latency, duration_from_seconds(c.latency_us * 1e-6));
  FSDP_TRY(cost.transfer, duration_from_seconds(c.transfer_us * 1e-6));
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
  if (kind == OpKind::kAllToAll) {
    // Grouped point-to-point under either collective model (all_to_all_cost); bus bytes as
    // nccl-tests' alltoall_perf counts them, (n - 1) / n of what each member sends.
    std::int64_t bytes = 0;
    if (!checked_mul(max_member_elements, dtype_bytes(dtype), &bytes)) {
      return Error(ErrorCode::kOutOfRange, "all-to-all bytes per member overflow int64");
    }
    FSDP_TRY(const AllToAllCost a, all_to_all_cost(bytes, link));
    CollectiveCost cost;
    cost.duration = a.duration;
    cost.latency = a.latency;
    cost.transfer = a.transfer;
    cost.bus_bytes =
        static_cast<double>(bytes) * static_cast<double>(n - 1) / static_cast<double>(n);
    return cost;
  }
  if (const CollectiveCurve* curve = measured_curve(link, kind)) {
    return measured_cost(*curve, kind, static_cast<double>(max_member_elements) * element_bytes,
                         n);
  }
  if (link.model == CollectiveModel::kNccl) {
    return nccl_cost(kind, static_cast<double>(max_member_elements) * element_bytes, link, options);
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
  if (link.model == CollectiveModel::kNccl) {
    // As one call of the members' mean payload (the same bus bytes).
    return nccl_cost(
        kind,
        total / static_cast<double>(link.group_size) * static_cast<double>(dtype_bytes(dtype)),
        link, options);
  }
  const double bandwidth = static_cast<double>(link.bytes_per_s) * options.link_efficiency;
  const double n = static_cast<double>(link.group_size);
  const double chunk =
      total * static_cast<double>(dtype_bytes(dtype)) / n;
  return ring(link.group_size - 1, chunk, (n - 1.0) * chunk, bandwidth, link, options);
}

namespace {

// The GPU count and size of a predicted bus bandwidth: at least two GPUs, a byte per GPU.
Status check_bus_bandwidth_call(std::int64_t bytes, std::int64_t gpus) {
  if (gpus < 2) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("bus bandwidth: GPU count: expected at least 2, got ", gpus));
  }
  if (bytes < gpus) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("bus bandwidth: size: expected at least one byte per GPU (", gpus,
                         "), got ", bytes));
  }
  return ok_status();
}

}  // namespace

Expected<BusBandwidth> predicted_bus_bandwidth(OpKind kind, std::int64_t bytes, std::int64_t gpus,
                                               const Hardware& hardware,
                                               const CostOptions& options) {
  if (kind != OpKind::kAllGather && kind != OpKind::kReduceScatter && kind != OpKind::kAllReduce) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("bus bandwidth: expected all-gather, reduce-scatter or all-reduce, got ",
                         to_string(kind)));
  }
  FSDP_RETURN_IF_ERROR(check_bus_bandwidth_call(bytes, gpus));
  FSDP_TRY(const DeviceMesh mesh, DeviceMesh::make({MeshAxis{"dp", gpus}}));
  const AxisLink link = axis_links(mesh, hardware).front();
  // One byte elements; the all-gather's and reduce-scatter's members get bytes / gpus each.
  const std::int64_t member = kind == OpKind::kAllReduce ? bytes : bytes / gpus;
  FSDP_TRY(const CollectiveCost cost, collective_cost(kind, member, DType::kFp8, link, options));
  BusBandwidth out;
  out.time = cost.duration;
  const double seconds = cost.duration.seconds();
  const double moved =
      kind == OpKind::kAllReduce ? static_cast<double>(bytes) : static_cast<double>(member * gpus);
  out.alg_bytes_per_s = seconds > 0 ? moved / seconds : 0.0;
  out.bus_bytes_per_s = seconds > 0 ? cost.bus_bytes / seconds : 0.0;
  out.algorithm = cost.algorithm;
  out.protocol = cost.protocol;
  return out;
}

Expected<AllToAllCost> all_to_all_cost(std::int64_t bytes_per_member, const AxisLink& link) {
  if (bytes_per_member < 0) {
    return Error(ErrorCode::kInvalidArgument,
                 str_cat("all-to-all: bytes per member: expected a non-negative count, got ",
                         bytes_per_member));
  }
  AllToAllCost cost;
  const std::int64_t n = link.group_size;
  if (n <= 1 || bytes_per_member == 0) {
    return cost;
  }
  const double bytes = static_cast<double>(bytes_per_member);
  const double nd = static_cast<double>(n);
  // Members on this member's node: all of them within one node, else the fewest on a node.
  const std::int64_t local = link.inter_node ? std::min(link.ranks_per_node, n) : n;
  cost.intra_node_bytes = bytes * static_cast<double>(local - 1) / nd;
  cost.inter_node_bytes = bytes * static_cast<double>(n - local) / nd;
  // Line rates: NCCL's NVLink and NIC figures when the hardware has them, the link's otherwise
  // (alpha-beta files); one GPU's share of its node's NICs is the group's share over its k.
  const double nvlink = link.nvlink_bytes_per_s > 0 ? static_cast<double>(link.nvlink_bytes_per_s)
                                                    : static_cast<double>(link.bytes_per_s);
  const double nic = link.nic_bytes_per_s > 0 ? static_cast<double>(link.nic_bytes_per_s) /
                                                    static_cast<double>(link.ranks_per_node)
                                              : static_cast<double>(link.bytes_per_s);
  double seconds = 0.0;
  if (cost.intra_node_bytes > 0) {
    seconds = std::max(seconds, cost.intra_node_bytes / (nvlink * nccl::kNvlinkEfficiency));
  }
  if (cost.inter_node_bytes > 0) {
    seconds = std::max(seconds, cost.inter_node_bytes / (nic * nccl::kNetworkEfficiency));
  }
  FSDP_TRY(cost.transfer, duration_from_seconds(seconds));
  FSDP_TRY(cost.latency, duration_from_seconds(static_cast<double>(link.latency_ns) * 1e-9));
  cost.duration = cost.latency + cost.transfer;
  return cost;
}

Expected<BusBandwidth> predicted_all_to_all_bus_bandwidth(std::int64_t bytes, std::int64_t gpus,
                                                          const Hardware& hardware) {
  FSDP_RETURN_IF_ERROR(check_bus_bandwidth_call(bytes, gpus));
  FSDP_TRY(const DeviceMesh mesh, DeviceMesh::make({MeshAxis{"ep", gpus}}));
  const AxisLink link = axis_links(mesh, hardware).front();
  FSDP_TRY(const AllToAllCost cost, all_to_all_cost(bytes, link));
  BusBandwidth out;
  out.time = cost.duration;
  const double seconds = cost.duration.seconds();
  out.alg_bytes_per_s = seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
  out.bus_bytes_per_s =
      out.alg_bytes_per_s * static_cast<double>(gpus - 1) / static_cast<double>(gpus);
  return out;
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
