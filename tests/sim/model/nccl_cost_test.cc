// SPDX-License-Identifier: Apache-2.0
// The NCCL collective model (docs/design/simulator.md, "Collectives as NCCL runs them"): the NIC
// share of axis_links, and every formula of the tuner on hand-sized cases. Latencies in us and
// bandwidths in GB/s below are NCCL 2.28's tuning constants (src/graph/tuning.cc).
#include <gtest/gtest.h>

#include <cstdint>

#include "core/hardware/hardware_presets.h"
#include "core/mesh/device_mesh.h"
#include "sim/model/cost_model.h"

namespace fsdp::sim {
namespace {

// NVLink 450 GB/s line x 0.824 (NCCL's 20.6 of 25 GB/s per NVLink 4 link) = 370.8 GB/s; a NIC
// share of 400 GB/s x 0.94 = 376 GB/s.
constexpr double kNvlink = 450e9 * 0.824 * 1e-9;

AxisLink nccl_link(std::int64_t n, std::int64_t nodes, std::int64_t k, std::int64_t nic,
                   std::int64_t nvls = 0) {
  return AxisLink{.group_size = n,
                  .inter_node = nodes > 1,
                  .bytes_per_s = 0,
                  .latency_ns = 0,
                  .model = CollectiveModel::kNccl,
                  .nodes = nodes,
                  .ranks_per_node = k,
                  .nvlink_bytes_per_s = 450'000'000'000,
                  .nic_bytes_per_s = nic,
                  .nvls_permille = nvls};
}

// Seconds of `latency_us` + `bytes` at `algbw_gb` GB/s (the tuner's time), to compare with a cost.
double tuner_seconds(double latency_us, double bytes, double algbw_gb) {
  return (latency_us + bytes / (1e3 * algbw_gb)) * 1e-6;
}

std::vector<AxisLink> links_of(const char* mesh, const char* preset) {
  return axis_links(parse_device_mesh(mesh).value(), find_hardware_preset(preset).value());
}

TEST(NcclLinkTest, AnAxisSpanningNodesSharesTheNodesNics) {
  // dp=16 on two 8-GPU H100 nodes: 8 members per node, the node's eight 50 GB/s NICs to itself.
  const AxisLink dp = links_of("dp=16", "h100")[0];
  EXPECT_EQ(dp.model, CollectiveModel::kNccl);
  EXPECT_EQ(dp.nodes, 2);
  EXPECT_EQ(dp.ranks_per_node, 8);
  EXPECT_EQ(dp.nic_bytes_per_s, 400'000'000'000);
  EXPECT_EQ(dp.bytes_per_s, 400'000'000'000);  // min(NVLink 450, NICs 400)
  EXPECT_EQ(dp.flow_links, kNetworkLink);
  // HSDP: the outer axis has one member per node, so 8 groups share the node's NICs: one each.
  const auto hsdp = links_of("dp_outer=2,dp_inner=8", "h100");
  EXPECT_EQ(hsdp[0].ranks_per_node, 1);
  EXPECT_EQ(hsdp[0].nic_bytes_per_s, 50'000'000'000);
  EXPECT_EQ(hsdp[0].flow_links, kNetworkLink);
  EXPECT_EQ(hsdp[1].nodes, 1);
  EXPECT_EQ(hsdp[1].bytes_per_s, 450'000'000'000);
  EXPECT_EQ(hsdp[1].flow_links, kNvlinkLink);
  // Two members per node (stride 4 on 8-GPU nodes): 4 groups share the NICs, 100 GB/s each.
  const AxisLink two = links_of("a=4,b=4", "h100")[0];
  EXPECT_EQ(two.nodes, 2);
  EXPECT_EQ(two.ranks_per_node, 2);
  EXPECT_EQ(two.nic_bytes_per_s, 100'000'000'000);
}

TEST(NcclLinkTest, TwoAxesCrossingNodesBothUseTheNics) {
  // x=2, y=16 on 8-GPU nodes: y spans 2 nodes with 8 members each, x has 1 member per node; the
  // flows of both occupy the network link, so concurrent ones share it.
  const auto links = links_of("x=2,y=16", "h100");
  EXPECT_NE(links[0].flow_links & kNetworkLink, 0);
  EXPECT_NE(links[1].flow_links & kNetworkLink, 0);
}

TEST(NcclLinkTest, AlphaBetaHardwareKeepsOneLinkPerAxis) {
  HardwareSpec spec = find_hardware_preset("h100")->spec();
  spec.collectives = CollectiveModel::kAlphaBeta;
  const Hardware hw = Hardware::make(spec).value();
  const AxisLink dp = axis_links(parse_device_mesh("dp=16").value(), hw)[0];
  EXPECT_EQ(dp.bytes_per_s, 50'000'000'000);
  EXPECT_EQ(dp.flow_links, kNetworkLink);
}

TEST(NcclCostTest, LargeAllGatherAcrossTwoNodesIsASimpleRingAtTheNvlinkBound) {
  // 16 GPUs, 2 nodes: bus bandwidth min(370.8, 376) = 370.8 GB/s; nBytes = 16 x 1e8.
  // Simple: algbw 370.8 x 16/15; latency 8.4 + 14 intra steps x max(3.4, 3 x 1.0 net overhead)
  // + 1 inter step x 14 = 70 us.
  const AxisLink link = nccl_link(16, 2, 8, 400'000'000'000);
  const CollectiveCost c =
      collective_cost(OpKind::kAllGather, 50'000'000, DType::kBf16, link, {}).value();
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(c.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(c.duration.seconds(), tuner_seconds(70.0, 16e8, kNvlink * 16.0 / 15.0), 1e-11);
  EXPECT_NEAR(c.latency.seconds(), 70e-6, 1e-11);
  EXPECT_DOUBLE_EQ(c.bus_bytes, 15e8);  // nccl-tests: (n - 1) x member
  const CollectiveCost rs =
      collective_cost(OpKind::kReduceScatter, 50'000'000, DType::kBf16, link, {}).value();
  EXPECT_EQ(rs.duration, c.duration);
}

TEST(NcclCostTest, SmallAllGatherPicksLlAtItsNetworkCap) {
  // 16 KiB in all: LL's bus bandwidth is min(39 GB/s (2 nodes), 370.8 / 2); latency 6.6 + 14 x
  // max(0.6, 1.0) + 1 x 2.7 = 23.3 us. LL128 (44.6 us) and Simple (70 us) are slower.
  const AxisLink link = nccl_link(16, 2, 8, 400'000'000'000);
  const CollectiveCost c = collective_cost(OpKind::kAllGather, 512, DType::kBf16, link, {}).value();
  EXPECT_EQ(c.protocol, NcclProtocol::kLl);
  EXPECT_NEAR(c.duration.seconds(), tuner_seconds(23.3, 16384.0, 39.0 * 16.0 / 15.0), 1e-11);
}

TEST(NcclCostTest, MidSizeAllGatherPicksLl128) {
  // 16 MiB in all on one node of 8 (no network cap on LL): LL 6.6 + 7 x 0.6 = 10.8 us at 185.4 x
  // 8/7 GB/s = 10.8 + 79.2; LL128 14 + 7 x 1.9 = 27.3 us at 0.92 x 370.8 x 8/7 = 27.3 + 43.0;
  // Simple 8.4 + 7 x 3.4 = 32.2 us + 39.6.
  const AxisLink link = nccl_link(8, 1, 8, 400'000'000'000);
  const double bytes = 16777216.0;
  const CollectiveCost c =
      collective_cost(OpKind::kAllGather, 1'048'576, DType::kBf16, link, {}).value();
  const double ll = tuner_seconds(10.8, bytes, kNvlink * 0.5 * 8.0 / 7.0);
  const double ll128 = tuner_seconds(27.3, bytes, kNvlink * 0.92 * 8.0 / 7.0);
  const double simple = tuner_seconds(32.2, bytes, kNvlink * 8.0 / 7.0);
  EXPECT_LT(ll128, ll);
  EXPECT_LT(ll128, simple);
  EXPECT_EQ(c.protocol, NcclProtocol::kLl128);
  EXPECT_NEAR(c.duration.seconds(), ll128, 1e-11);
  // A quarter of it (4 MiB) goes to LL.
  EXPECT_EQ(collective_cost(OpKind::kAllGather, 262'144, DType::kBf16, link, {})->protocol,
            NcclProtocol::kLl);
}

TEST(NcclCostTest, LargeAllReduceOnManyNodesTakesTheTree) {
  // 256 GPUs on 32 nodes, 256 MiB. Ring Simple: 8.4 + 448 x 3.4 + 62 x 14 = 2399.6 us, x 1.4
  // plateau. Tree LL128: 14 + 2 (7 x 1.25 + log2(32) x 8.5) = 116.5 us at 0.92 x 370.8 x 120/128
  // x 0.5 GB/s (correction factor 1.0 at 2^22 x 64 B); tree Simple pays 0.9 of its bandwidth.
  const AxisLink link = nccl_link(256, 32, 8, 400'000'000'000);
  const double bytes = 268435456.0;
  const CollectiveCost c =
      collective_cost(OpKind::kAllReduce, 67'108'864, DType::kFp32, link, {}).value();
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kTree);
  EXPECT_TRUE(c.tree);
  EXPECT_EQ(c.protocol, NcclProtocol::kLl128);
  EXPECT_NEAR(c.duration.seconds(),
              tuner_seconds(116.5, bytes, kNvlink * 0.92 * 120.0 / 128.0 * 0.5), 1e-11);
  // Forced ring: Simple with the plateau, or LL128 (14 + 448 x 1.9 + 62 x 4 = 1113.2 us).
  CostOptions ring;
  ring.all_reduce = AllReduceAlgorithm::kRing;
  const CollectiveCost r =
      collective_cost(OpKind::kAllReduce, 67'108'864, DType::kFp32, link, ring).value();
  EXPECT_EQ(r.algorithm, NcclAlgorithm::kRing);
  EXPECT_NEAR(r.duration.seconds(),
              std::min(tuner_seconds(2399.6 * 1.4, bytes, kNvlink * 256.0 / 510.0),
                       tuner_seconds(1113.2, bytes, kNvlink * 0.92 * 256.0 / 510.0)),
              1e-11);
  EXPECT_DOUBLE_EQ(r.bus_bytes, 2.0 * 255.0 / 256.0 * bytes);
}

TEST(NcclCostTest, TreeBandwidthFollowsNcclsSizeCorrection) {
  // 2 MiB (64 B x 2^15) forced tree on 4 nodes of 8: the Simple correction there is 0.6, LL128's
  // 0.6, LL's 0.6.
  const AxisLink link = nccl_link(32, 4, 8, 400'000'000'000);
  CostOptions tree;
  tree.all_reduce = AllReduceAlgorithm::kTree;
  const CollectiveCost c =
      collective_cost(OpKind::kAllReduce, 524'288, DType::kFp32, link, tree).value();
  const double bytes = 2097152.0;
  const double bus = kNvlink * 0.92;
  const double simple = tuner_seconds(8.4 + 2.0 * (7.0 * 4.0 + 2.0 * 14.0), bytes, bus * 0.5 * 0.6);
  const double ll128 =
      tuner_seconds(14.0 + 2.0 * (7.0 * 1.25 + 2.0 * 8.5), bytes, bus * 120.0 / 128.0 * 0.5 * 0.6);
  const double ll = tuner_seconds(6.8 + 2.0 * (7.0 * 0.6 + 2.0 * 5.0), bytes,
                                  std::min(bus / 3.8, 20.4) * 0.5 * 0.6);
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kTree);
  EXPECT_NEAR(c.duration.seconds(), std::min({simple, ll128, ll}), 1e-11);
}

TEST(NcclCostTest, NvlsAllReduceInsideAnNvlsNode) {
  // 1 GiB on 8 GPUs with NVLS at 0.85: bus 370.8 x 0.85 x 15/16 x 2, algbw x 8/14, latency 25 us.
  const AxisLink link = nccl_link(8, 1, 8, 400'000'000'000, 850);
  const double bytes = 1073741824.0;
  const CollectiveCost c =
      collective_cost(OpKind::kAllReduce, 268'435'456, DType::kFp32, link, {}).value();
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kNvls);
  EXPECT_NEAR(c.duration.seconds(),
              tuner_seconds(25.0, bytes, kNvlink * 0.85 * 15.0 / 16.0 * 2.0 * 8.0 / 14.0), 1e-11);
  // Without NVLS (an A100 node), or with the ring forced, the ring takes it.
  EXPECT_EQ(collective_cost(OpKind::kAllReduce, 268'435'456, DType::kFp32,
                            nccl_link(8, 1, 8, 400'000'000'000), {})
                ->algorithm,
            NcclAlgorithm::kRing);
  // Small all-reduces stay off NVLS (its 25 us latency).
  EXPECT_NE(collective_cost(OpKind::kAllReduce, 1024, DType::kFp32, link, {})->algorithm,
            NcclAlgorithm::kNvls);
}

TEST(NcclCostTest, OneGpuPerNodeRingUsesOneNicAndTheTreesNetworkLatency) {
  // HSDP's outer all-reduce on 2 nodes, one NIC (50 GB/s x 0.94) per GPU, 64 MiB. Ring Simple:
  // 8.4 + 2 x 14 (one GPU per node: the tree's network latency) = 36.4 us x 1.4 plateau.
  const AxisLink link = nccl_link(2, 2, 1, 50'000'000'000);
  CostOptions ring;
  ring.all_reduce = AllReduceAlgorithm::kRing;
  const CollectiveCost c =
      collective_cost(OpKind::kAllReduce, 16'777'216, DType::kFp32, link, ring).value();
  EXPECT_EQ(c.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(c.duration.seconds(), tuner_seconds(36.4 * 1.4, 67108864.0, 47.0 * 2.0 / 2.0), 1e-11);
}

TEST(NcclCostTest, LinkEfficiencyScalesEveryBandwidth) {
  const AxisLink link = nccl_link(16, 2, 8, 400'000'000'000);
  CostOptions half;
  half.link_efficiency = 0.5;
  const CollectiveCost c =
      collective_cost(OpKind::kAllGather, 50'000'000, DType::kBf16, link, half).value();
  EXPECT_NEAR(c.duration.seconds(), tuner_seconds(70.0, 16e8, 0.5 * kNvlink * 16.0 / 15.0), 1e-11);
}

TEST(NcclCostTest, GroupedBroadcastCostsTheMeanPayload) {
  const AxisLink link = nccl_link(16, 2, 8, 400'000'000'000);
  CostOptions b;
  b.uneven = UnevenCollective::kGroupedBroadcast;
  std::vector<std::int64_t> members(16, 1000);
  members[0] = 17'000;  // total 32,000: a mean of 2,000
  EXPECT_EQ(
      uneven_collective_cost(OpKind::kAllGather, 17'000, members, DType::kBf16, link, b)->duration,
      collective_cost(OpKind::kAllGather, 2000, DType::kBf16, link, {})->duration);
}

TEST(NcclCostTest, PredictedBusBandwidthIsWhatNcclTestsWouldPrint) {
  const Hardware h100 = find_hardware_preset("h100").value();
  // 16 GPUs, 1 GiB all-gather: the Simple ring at 370.8 GB/s bus bandwidth, less its latency.
  const BusBandwidth b = predicted_bus_bandwidth(OpKind::kAllGather, 1 << 30, 16, h100, {}).value();
  const double seconds = tuner_seconds(70.0, 1073741824.0, kNvlink * 16.0 / 15.0);
  EXPECT_NEAR(b.alg_bytes_per_s, 1073741824.0 / seconds, 1e3);
  EXPECT_NEAR(b.bus_bytes_per_s, 1073741824.0 / seconds * 15.0 / 16.0, 1e3);
  EXPECT_EQ(b.protocol, NcclProtocol::kSimple);
  EXPECT_EQ(predicted_bus_bandwidth(OpKind::kAllGather, 1024, 1, h100, {}).error().message(),
            "bus bandwidth: GPU count: expected at least 2, got 1");
  EXPECT_EQ(predicted_bus_bandwidth(OpKind::kAllGather, 8, 16, h100, {}).error().message(),
            "bus bandwidth: size: expected at least one byte per GPU (16), got 8");
  EXPECT_FALSE(predicted_bus_bandwidth(OpKind::kForward, 1024, 8, h100, {}).has_value());
}

// All-to-all (docs/design/simulator.md, "All-to-all"): grouped point-to-point, NVLink and the
// member's own NIC share at once.
TEST(AllToAllCostTest, InsideANodeItIsNvlinkBound) {
  AxisLink link = nccl_link(8, 1, 8, 400'000'000'000);
  link.latency_ns = 1000;
  const AllToAllCost c = all_to_all_cost(8'000'000'000, link).value();
  // 7 of every 8 bytes go to the other members over NVLink; the 8th stays.
  EXPECT_DOUBLE_EQ(c.intra_node_bytes, 7e9);
  EXPECT_DOUBLE_EQ(c.inter_node_bytes, 0);
  EXPECT_NEAR(c.transfer.seconds(), 7e9 / (kNvlink * 1e9), 1e-9);
  EXPECT_NEAR(c.latency.seconds(), 1e-6, 1e-11);  // rounded up to whole ps
  EXPECT_EQ(c.duration, c.latency + c.transfer);
}

TEST(AllToAllCostTest, AcrossNodesEachMemberUsesItsOwnNic) {
  // 16 members on 2 nodes of 8: half of each member's bytes cross to the other node through its
  // own NIC (the group's 8-NIC share over its 8 members: 50 GB/s line, 47 achieved), 7/16 stay
  // on NVLink: the NIC binds.
  const AllToAllCost two =
      all_to_all_cost(16'000'000'000, nccl_link(16, 2, 8, 400'000'000'000)).value();
  EXPECT_DOUBLE_EQ(two.inter_node_bytes, 8e9);
  EXPECT_DOUBLE_EQ(two.intra_node_bytes, 7e9);
  EXPECT_NEAR(two.transfer.seconds(), 8e9 / 47e9, 1e-9);
  // 64 members on 8 nodes: 56/64 cross the network, so the same bytes take longer.
  const AllToAllCost eight =
      all_to_all_cost(16'000'000'000, nccl_link(64, 8, 8, 400'000'000'000)).value();
  EXPECT_NEAR(eight.transfer.seconds(), 16e9 * 56 / 64 / 47e9, 1e-9);
  EXPECT_GT(eight.transfer, two.transfer);
}

TEST(AllToAllCostTest, BusBandwidthFollowsTheMaintainersFormula) {
  // NVIDIA/nccl-tests#130: busbw = algbw x (n - 1) / n; network-bound across N nodes it tends to
  // one NIC's bandwidth as N grows (x (n - 1) / (n - k) exactly, here).
  const Hardware h100 = find_hardware_preset("h100").value();
  const double one_node = predicted_all_to_all_bus_bandwidth(1LL << 30, 8, h100)->bus_bytes_per_s;
  EXPECT_NEAR(one_node * 1e-9, kNvlink, 0.5);  // less the latency of a 1 GiB call
  double previous = 1e30;
  for (std::int64_t gpus : {16, 64, 256}) {
    const double bus = predicted_all_to_all_bus_bandwidth(1LL << 30, gpus, h100)->bus_bytes_per_s;
    const double expected = 47e9 * static_cast<double>(gpus - 1) / static_cast<double>(gpus - 8);
    EXPECT_NEAR(bus, expected, expected * 0.002) << gpus;
    EXPECT_LT(bus, previous) << gpus;
    previous = bus;
  }
  // Small messages are latency-bound: far below the large-message figure.
  EXPECT_LT(predicted_all_to_all_bus_bandwidth(64 * 1024, 16, h100)->bus_bytes_per_s, 20e9);
}

TEST(AllToAllCostTest, EdgesAndErrors) {
  EXPECT_EQ(all_to_all_cost(1 << 20, nccl_link(1, 1, 1, 0)).value().duration, SimDuration());
  EXPECT_EQ(all_to_all_cost(0, nccl_link(8, 1, 8, 0)).value().duration, SimDuration());
  const auto bad = all_to_all_cost(-1, nccl_link(8, 1, 8, 0));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message(),
            "all-to-all: bytes per member: expected a non-negative count, got -1");
  const Hardware h100 = find_hardware_preset("h100").value();
  EXPECT_FALSE(predicted_all_to_all_bus_bandwidth(1 << 20, 1, h100).has_value());
  EXPECT_FALSE(predicted_all_to_all_bus_bandwidth(8, 16, h100).has_value());
}

}  // namespace
}  // namespace fsdp::sim
