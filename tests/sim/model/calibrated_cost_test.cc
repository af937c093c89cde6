// SPDX-License-Identifier: Apache-2.0
// The cost models with a hardware calibration: measured compute rates and collective curves
// replace the datasheet formulas; without a calibration nothing changes.
#include <gtest/gtest.h>

#include "sim/model/cost_model.h"
#include "tests/sim/sim_test_util.h"

namespace fsdp::sim {
namespace {

Hardware calibrated(Calibration c) {
  HardwareSpec spec = testing::round_hardware().spec();
  spec.calibration = std::move(c);
  return Hardware::make(spec).value();
}

Calibration measured() {
  Calibration c;
  c.ranks = 4;
  c.copy_bytes_per_s = 10'000'000'000;
  c.compute_slowdown_permille = 1500;
  c.compute = {{OpKind::kForward, 1'000'000'000, 0}, {OpKind::kGradCopy, 0, 2'000'000'000}};
  c.collectives = {{OpKind::kAllGather, 4, {{4000, 50'000}, {4'000'000, 2'050'000}}}};
  return c;
}

DeviceMesh dp(std::int64_t n) {
  std::vector<MeshAxis> axes(1);
  axes[0].name = "dp";
  axes[0].size = n;
  return DeviceMesh::make(std::move(axes)).value();
}

TEST(CalibratedCostTest, ComputeUsesTheMeasuredRateOfItsKind) {
  const Hardware hw = calibrated(measured());
  Op forward;
  forward.kind = OpKind::kForward;
  forward.dtype = DType::kFp32;
  forward.flops = 3'000'000'000;
  forward.mem_bytes = 1'000'000;  // no memory term for forward
  EXPECT_EQ(compute_cost(forward, hw, {})->ps(), 3'000'000'000'000);  // 3 s
  Op copy;
  copy.kind = OpKind::kGradCopy;
  copy.mem_bytes = 4'000'000;
  EXPECT_EQ(compute_cost(copy, hw, {})->ps(), 2'000'000'000);  // 2 ms
  // A kind without a measured rate keeps the datasheet formula.
  Op backward = forward;
  backward.kind = OpKind::kBackward;
  EXPECT_EQ(compute_cost(backward, hw, {}).value(), compute_cost(backward, testing::round_hardware(), {}).value());
}

TEST(CalibratedCostTest, CollectivesReadTheCurveOfTheirGroupSize) {
  const Hardware hw = calibrated(measured());
  const std::vector<AxisLink> four = axis_links(dp(4), hw);
  ASSERT_EQ(four[0].measured.size(), 1U);
  // 1e6 fp32 elements per member = 4e6 bytes: the second point, 2.05 ms; 50 us of it latency.
  const CollectiveCost c =
      collective_cost(OpKind::kAllGather, 1'000'000, DType::kFp32, four[0], {}).value();
  EXPECT_EQ(c.duration.ps(), 2'050'000'000);
  EXPECT_EQ(c.latency.ps(), 50'000'000);
  EXPECT_DOUBLE_EQ(c.bus_bytes, 3 * 4e6);
  // Uneven members: read at the mean payload, 2e6 bytes: 50 us + (2e6 - 4000) / 3.996e6 * 2 ms.
  const std::int64_t members[] = {0, 1'000'000, 500'000, 500'000};
  const CollectiveCost u = uneven_collective_cost(OpKind::kAllGather, 1'000'000, members,
                                                  DType::kFp32, four[0], {}).value();
  EXPECT_NEAR(static_cast<double>(u.duration.ps()), 1'048'998'999.0, 1000.0);
  // Reduce-scatter has no curve, and a group of 8 none at all: the ring formula.
  const CollectiveCost rs =
      collective_cost(OpKind::kReduceScatter, 1'000'000, DType::kFp32, four[0], {}).value();
  AxisLink plain = four[0];
  plain.measured.clear();
  EXPECT_EQ(rs.duration,
            collective_cost(OpKind::kReduceScatter, 1'000'000, DType::kFp32, plain, {})->duration);
  EXPECT_TRUE(axis_links(dp(8), hw)[0].measured.empty());
}

TEST(CalibratedCostTest, OptionsTakeTheMeasuredSlowdown) {
  EXPECT_DOUBLE_EQ(calibrated_cost_options({}, calibrated(measured())).sm_slowdown, 1.5);
  EXPECT_DOUBLE_EQ(calibrated_cost_options({}, testing::round_hardware()).sm_slowdown, 1.0);
}

}  // namespace
}  // namespace fsdp::sim
