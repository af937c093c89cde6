// SPDX-License-Identifier: Apache-2.0
// fit_calibration: rates and curves from measured ops (sums, medians per payload), what it keeps
// from the base, and its errors.
#include "core/hardware/calibration_fit.h"

#include <vector>

#include <gtest/gtest.h>

namespace fsdp {
namespace {

Calibration base() {
  Calibration c;
  c.source = "base";
  c.ranks = 4;
  c.copy_bytes_per_s = 8'000'000'000;
  c.compute_slowdown_permille = 1300;
  c.compute = {{OpKind::kForward, 20'000'000'000, 0}, {OpKind::kGradCopy, 0, 8'000'000'000}};
  c.collectives = {{OpKind::kAllGather, 4, {{4096, 20'000}, {1 << 20, 400'000}}},
                   {OpKind::kAllReduce, 2, {{4096, 9'000}}}};
  return c;
}

MeasuredOp compute(OpKind kind, std::int64_t flops, std::int64_t ns) {
  return MeasuredOp{kind, flops, 0, 0, ns};
}

MeasuredOp collective(OpKind kind, std::int64_t bytes, std::int64_t ranks, std::int64_t ns) {
  return MeasuredOp{kind, 0, bytes, ranks, ns};
}

TEST(CalibrationFitTest, RatesAreSummedFlopsOverSummedTime) {
  const std::vector<MeasuredOp> ops = {compute(OpKind::kForward, 3'000'000, 1'000'000),
                                       compute(OpKind::kForward, 1'000'000, 1'000'000),
                                       compute(OpKind::kBackward, 9'000'000, 3'000'000),
                                       compute(OpKind::kGradCopy, 0, 5'000)};
  auto fit = fit_calibration(base(), ops, "fit");
  ASSERT_TRUE(fit.has_value()) << fit.error().message();
  EXPECT_EQ(fit->source, "fit");
  EXPECT_EQ(fit->compute_slowdown_permille, 1000);
  // forward: 4e6 FLOPs in 2 ms = 2 GFLOP/s, replacing base's 20 GFLOP/s; backward: 3 GFLOP/s, new.
  EXPECT_EQ(*find_compute_rate(*fit, OpKind::kForward),
            (ComputeRate{OpKind::kForward, 2'000'000'000, 0}));
  EXPECT_EQ(*find_compute_rate(*fit, OpKind::kBackward),
            (ComputeRate{OpKind::kBackward, 3'000'000'000, 0}));
  // grad-copy has no FLOPs: base's bandwidth stays.
  EXPECT_EQ(*find_compute_rate(*fit, OpKind::kGradCopy), base().compute[1]);
  EXPECT_EQ(fit->copy_bytes_per_s, base().copy_bytes_per_s);
  EXPECT_EQ(fit->collectives, base().collectives);  // no collective measured
}

TEST(CalibrationFitTest, CurvesHaveTheMedianPerPayload) {
  const std::vector<MeasuredOp> ops = {
      collective(OpKind::kAllGather, 8192, 4, 300), collective(OpKind::kAllGather, 4096, 4, 100),
      collective(OpKind::kAllGather, 8192, 4, 100), collective(OpKind::kAllGather, 8192, 4, 200),
      collective(OpKind::kAllGather, 4096, 4, 151), collective(OpKind::kReduceScatter, 512, 2, 70)};
  auto fit = fit_calibration(base(), ops, "fit");
  ASSERT_TRUE(fit.has_value()) << fit.error().message();
  const CollectiveCurve* ag = find_collective_curve(*fit, OpKind::kAllGather, 4);
  ASSERT_NE(ag, nullptr);
  // 4096: median of {100, 151} = 125.5, rounded up; 8192: median of {100, 200, 300}.
  EXPECT_EQ(ag->points, (std::vector<CollectivePoint>{{4096, 126}, {8192, 200}}));
  const CollectiveCurve* rs = find_collective_curve(*fit, OpKind::kReduceScatter, 2);
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->points, (std::vector<CollectivePoint>{{512, 70}}));
  // Base's all-reduce on 2 ranks is not measured here and stays.
  EXPECT_EQ(*find_collective_curve(*fit, OpKind::kAllReduce, 2), base().collectives[1]);
  EXPECT_EQ(fit->collectives.size(), 3u);
}

TEST(CalibrationFitTest, BadMeasurementsAreOneLineErrors) {
  auto expect_error = [](std::vector<MeasuredOp> ops, const std::string& text) {
    auto fit = fit_calibration(base(), ops, "fit");
    ASSERT_FALSE(fit.has_value());
    EXPECT_NE(fit.error().message().find(text), std::string::npos) << fit.error().message();
    EXPECT_EQ(fit.error().message().find('\n'), std::string::npos);
  };
  expect_error({}, "no measured op");
  expect_error({compute(OpKind::kForward, 10, -1)}, "measured op 0: duration is -1 ns");
  expect_error({compute(OpKind::kForward, 10, 1), compute(OpKind::kBackward, -5, 1)},
               "measured op 1: backward FLOPs are -5; expected >= 0");
  expect_error({collective(OpKind::kAllGather, 0, 4, 10)},
               "all-gather payload is 0 bytes; expected >= 1");
  expect_error({collective(OpKind::kReduceScatter, 64, 1, 10)},
               "reduce-scatter group has 1 ranks; expected >= 2");
}

}  // namespace
}  // namespace fsdp
