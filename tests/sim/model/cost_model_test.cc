// SPDX-License-Identifier: Apache-2.0
#include "sim/model/cost_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/hardware/hardware_presets.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

TEST(CostModelTest, AllGatherFollowsRingAlphaBeta) {
  const AxisLink link{8, false, 100'000'000'000, 1000};
  // 1e6 bf16 elements per member: the bus carries 7 * 2e6 bytes at 1e11 B/s = 140 us, plus
  // 7 steps of 1 us latency.
  const CollectiveCost c = collective_cost(OpKind::kAllGather, 1'000'000, DType::kBf16, link, {}).value();
  EXPECT_DOUBLE_EQ(c.bus_bytes, 14e6);
  EXPECT_EQ(c.duration.ps(), 147'000'000);
  const CollectiveCost rs =
      collective_cost(OpKind::kReduceScatter, 1'000'000, DType::kBf16, link, {}).value();
  EXPECT_EQ(rs.duration, c.duration);
}

TEST(CostModelTest, AllReduceMovesTwiceTheBusBytesInTwiceTheSteps) {
  const AxisLink link{4, true, 10'000'000'000, 10'000};
  // 4e6 fp32 elements = 16e6 bytes; bus bytes 2 * 3/4 * 16e6 = 24e6 at 1e10 B/s = 2.4 ms;
  // latency 10 us * 3 * 2.
  const CollectiveCost c = collective_cost(OpKind::kAllReduce, 4'000'000, DType::kFp32, link, {}).value();
  EXPECT_DOUBLE_EQ(c.bus_bytes, 24e6);
  EXPECT_EQ(c.duration.ps(), 2'400'000'000 + 60'000'000);
}

TEST(CostModelTest, GroupOfOneIsFree) {
  const AxisLink link{1, false, 100, 1000};
  EXPECT_EQ(collective_cost(OpKind::kAllGather, 1 << 20, DType::kBf16, link, {})->duration.ps(), 0);
}

TEST(CostModelTest, LinkEfficiencyScalesTheBandwidthTerm) {
  const AxisLink link{2, false, 1'000'000'000, 0};
  CostOptions o;
  o.link_efficiency = 0.5;
  // 1000 bf16 elements: 2000 bus bytes at 0.5e9 B/s = 4 us.
  EXPECT_EQ(collective_cost(OpKind::kAllGather, 1000, DType::kBf16, link, o)->duration.ps(),
            4'000'000);
}

TEST(CostModelTest, TreeAllReduceTradesBandwidthForLogarithmicLatency) {
  const AxisLink link{16, true, 10'000'000'000, 10'000};
  CostOptions ring;
  ring.all_reduce = AllReduceAlgorithm::kRing;
  CostOptions tree;
  tree.all_reduce = AllReduceAlgorithm::kTree;
  // 16e6 bytes. Ring: 30 steps of 10 us + 2 * 15/16 * 16e6 B at 1e10 B/s = 300 us + 3 ms.
  // Tree: 2 * log2(16) = 8 steps + 2 * 16e6 B at 1e10 B/s = 80 us + 3.2 ms.
  const auto r = collective_cost(OpKind::kAllReduce, 4'000'000, DType::kFp32, link, ring).value();
  const auto t = collective_cost(OpKind::kAllReduce, 4'000'000, DType::kFp32, link, tree).value();
  EXPECT_EQ(r.duration.ps(), 3'300'000'000);
  EXPECT_EQ(t.duration.ps(), 3'280'000'000);
  EXPECT_TRUE(t.tree);
  EXPECT_DOUBLE_EQ(t.bus_bytes, r.bus_bytes);
  // Auto picks the faster one: the tree here, and by far for a latency-bound message.
  EXPECT_TRUE(collective_cost(OpKind::kAllReduce, 4'000'000, DType::kFp32, link, {})->tree);
  const auto small = collective_cost(OpKind::kAllReduce, 1000, DType::kFp32, link, {}).value();
  EXPECT_TRUE(small.tree);
  EXPECT_EQ(small.duration.ps(), 80'000'000 + 800'000);
  // Inside a node auto keeps the ring, as NCCL does.
  const AxisLink nvlink{16, false, 10'000'000'000, 10'000};
  EXPECT_FALSE(collective_cost(OpKind::kAllReduce, 1000, DType::kFp32, nvlink, {})->tree);
  // Ring: the latency and transfer terms add up to the duration.
  EXPECT_EQ((r.latency + r.transfer).ps(), r.duration.ps());
}

TEST(CostModelTest, SmallMessagesCostTheMinimumEfficientSize) {
  const AxisLink link{8, false, 100'000'000'000, 1000};
  CostOptions o;
  o.min_message_bytes = 65'536;
  // 2000 B per ring step costs as 64 KiB: 7 * 65536 B at 1e11 B/s = 4.58752 us, plus 7 us.
  const auto c = collective_cost(OpKind::kAllGather, 1000, DType::kBf16, link, o).value();
  EXPECT_EQ(c.duration.ps(), 7'000'000 + 4'587'520);
  EXPECT_DOUBLE_EQ(c.bus_bytes, 14'000);  // the real bytes
  // Messages above the minimum are unaffected.
  EXPECT_EQ(collective_cost(OpKind::kAllGather, 1'000'000, DType::kBf16, link, o)->duration,
            collective_cost(OpKind::kAllGather, 1'000'000, DType::kBf16, link, {})->duration);
}

TEST(CostModelTest, UnevenCountsArePaddedOrBroadcast) {
  const AxisLink link{4, false, 1'000'000'000, 0};
  const std::vector<std::int64_t> members = {100, 300, 200, 400};
  // Padded to 400: 3 steps of 800 B = 2.4 us. Grouped broadcasts: 3/4 of 2000 B = 1.5 us.
  EXPECT_EQ(uneven_collective_cost(OpKind::kAllGather, 100, members, DType::kBf16, link, {})
                ->duration.ps(),
            2'400'000);
  CostOptions b;
  b.uneven = UnevenCollective::kGroupedBroadcast;
  EXPECT_EQ(uneven_collective_cost(OpKind::kReduceScatter, 100, members, DType::kBf16, link, b)
                ->duration.ps(),
            1'500'000);
  // Even members: both policies agree.
  const std::vector<std::int64_t> even = {300, 300, 300, 300};
  EXPECT_EQ(uneven_collective_cost(OpKind::kAllGather, 300, even, DType::kBf16, link, b)->duration,
            collective_cost(OpKind::kAllGather, 300, DType::kBf16, link, {})->duration);
}

TEST(CostModelTest, ComputeIsTheSlowerOfMathAndMemory) {
  const Hardware hw = testing::round_hardware();
  // 1e12 FLOPs at 1e15 * 0.5 = 2 ms; 1e9 bytes at 1e12 * 0.8 = 1.25 ms.
  EXPECT_EQ(compute_cost(testing::compute_op(OpKind::kForward, 1'000'000'000'000, 1'000'000'000),
                         hw, {})
                ->ps(),
            2'000'000'000);
  // A grad copy of 4e9 bytes: memory-bound, 5 ms.
  EXPECT_EQ(compute_cost(testing::compute_op(OpKind::kGradCopy, 0, 4'000'000'000), hw, {})->ps(),
            5'000'000'000);
  Op fp32 = testing::compute_op(OpKind::kOptimizerStep, 1'000'000'000, 0);
  fp32.dtype = DType::kFp32;
  // 1e9 FLOPs at 1e14 * 0.5 = 20 us.
  EXPECT_EQ(compute_cost(fp32, hw, {})->ps(), 20'000'000);
  EXPECT_EQ(compute_cost(testing::sync_op(OpKind::kRecord, StreamKind::kCompute, 0), hw, {})->ps(),
            0);
}

TEST(CostModelTest, AxisSpanningNodesUsesTheNetwork) {
  const Hardware hw = find_hardware_preset("h100").value();
  const auto dp16 = axis_links(parse_device_mesh("dp=16").value(), hw);
  ASSERT_EQ(dp16.size(), 1u);
  EXPECT_TRUE(dp16[0].inter_node);
  // NCCL model: the ring crosses nodes over all 8 NICs of each node (8 x 50 GB/s < NVLink 450).
  EXPECT_EQ(dp16[0].bytes_per_s, hw.nics_per_node() * hw.inter_node_bytes_per_s());
  const auto dp8 = axis_links(parse_device_mesh("dp=8").value(), hw);
  EXPECT_FALSE(dp8[0].inter_node);
  EXPECT_EQ(dp8[0].latency_ns, hw.intra_node_latency_ns());
  const auto hsdp = axis_links(parse_device_mesh("dp_outer=4,dp_inner=8").value(), hw);
  EXPECT_TRUE(hsdp[0].inter_node);
  EXPECT_EQ(hsdp[0].group_size, 4);
  EXPECT_FALSE(hsdp[1].inter_node);
  // Inner axis of 16 spans two nodes; the outer axis (stride 16) always does.
  const auto wide = axis_links(parse_device_mesh("a=2,b=16").value(), hw);
  EXPECT_TRUE(wide[0].inter_node);
  EXPECT_TRUE(wide[1].inter_node);
  // 4 ranks per group of the inner axis on 8-device nodes stay inside a node.
  const auto small = axis_links(parse_device_mesh("a=4,b=4").value(), hw);
  EXPECT_TRUE(small[0].inter_node);
  EXPECT_FALSE(small[1].inter_node);
}

// axis_links visits only the first rank of each group; every rank's group must agree with it.
TEST(CostModelTest, AxisSpanningNodesMatchesEveryRanksGroup) {
  const Hardware hw = find_hardware_preset("h100").value();
  const std::int64_t per_node = hw.devices_per_node();
  for (const char* spec : {"a=2,b=3,c=4", "a=3,b=2,c=2", "a=2,b=16", "a=5,b=3"}) {
    const DeviceMesh mesh = parse_device_mesh(spec).value();
    const auto links = axis_links(mesh, hw);
    ASSERT_EQ(static_cast<std::int64_t>(links.size()), mesh.ndim()) << spec;
    // Row-major coordinates, last axis fastest.
    const auto coords = [&](std::int64_t r) {
      std::vector<std::int64_t> c(static_cast<std::size_t>(mesh.ndim()));
      for (std::int64_t a = mesh.ndim() - 1; a >= 0; --a) {
        c[static_cast<std::size_t>(a)] = r % mesh.axis_size(a);
        r /= mesh.axis_size(a);
      }
      return c;
    };
    for (std::int64_t a = 0; a < mesh.ndim(); ++a) {
      // Two ranks share a group of axis a when all their other coordinates agree.
      bool spans = false;
      for (std::int64_t r = 0; r < mesh.size(); ++r) {
        for (std::int64_t q = 0; q < mesh.size(); ++q) {
          std::vector<std::int64_t> cr = coords(r);
          std::vector<std::int64_t> cq = coords(q);
          cr[static_cast<std::size_t>(a)] = 0;
          cq[static_cast<std::size_t>(a)] = 0;
          spans = spans || (cr == cq && r / per_node != q / per_node);
        }
      }
      EXPECT_EQ(links[static_cast<std::size_t>(a)].inter_node, spans) << spec << " axis " << a;
    }
  }
}

}  // namespace
}  // namespace fsdp::sim
