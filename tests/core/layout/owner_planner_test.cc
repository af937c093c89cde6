// SPDX-License-Identifier: Apache-2.0
// LPT owner planning: determinism, tie-breaking and balance.
#include "core/layout/owner_planner.h"

#include "core/layout/layout_builder.h"
#include "core/layout/layout_validation.h"
#include "tests/core/layout/layout_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace fsdp {
namespace {

using testing::is_error;
using testing::shapes;
using V = std::vector<std::int64_t>;

TEST(OwnerPlannerTest, LargestFirstOntoLeastLoaded) {
  // 10 -> r0, 9 -> r1, 8 -> r1 (9 < 10), 7 -> r0 (10 < 17), 1 -> r0 (17 == 17: lower rank).
  EXPECT_EQ(*plan_tensor_owners(shapes({{10}, {9}, {8}, {7}, {1}}), 2), (V{0, 1, 1, 0, 0}));
}

TEST(OwnerPlannerTest, TiesInIdOrderAndLowestRank) {
  EXPECT_EQ(*plan_tensor_owners(shapes({{4}, {4}, {4}}), 2), (V{0, 1, 0}));
  EXPECT_EQ(*plan_tensor_owners(shapes({{2, 2}, {4}, {1, 4}}), 3), (V{0, 1, 2}));
}

TEST(OwnerPlannerTest, MoreRanksThanTensors) {
  EXPECT_EQ(*plan_tensor_owners(shapes({{3}, {5}}), 1000), (V{1, 0}));
  EXPECT_EQ(*plan_tensor_owners({}, 4), V{});
}

TEST(OwnerPlannerTest, ZeroNumelTensorsStayOnLowestRank) {
  EXPECT_EQ(*plan_tensor_owners(shapes({{0, 4}, {0}, {5}}), 3), (V{1, 1, 0}));
}

TEST(OwnerPlannerTest, RejectsNonPositiveDp) {
  EXPECT_TRUE(is_error(plan_tensor_owners(shapes({{3}}), 0), ErrorCode::kInvalidArgument,
                       {"dp size must be positive", "got 0"}));
}

TEST(OwnerPlannerTest, LoadOverflowIsOutOfRange) {
  const auto s = shapes({{1, std::int64_t{1} << 62}, {1, std::int64_t{1} << 62}});
  EXPECT_TRUE(is_error(plan_tensor_owners(s, 1), ErrorCode::kOutOfRange,
                       {"rank 0 load overflows int64", "tensor 1"}));
}

TEST(OwnerPlannerTest, BalancedDeterministicAndBuildable) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    const std::int64_t dp = std::uniform_int_distribution<std::int64_t>(1, 9)(rng);
    std::vector<Shape> s;
    const int n = std::uniform_int_distribution<int>(0, 80)(rng);
    std::int64_t max_numel = 0;
    for (int i = 0; i < n; ++i) {
      const std::int64_t rows = std::uniform_int_distribution<std::int64_t>(0, 64)(rng);
      const std::int64_t cols = std::uniform_int_distribution<std::int64_t>(1, 64)(rng);
      s.push_back(testing::shape({rows, cols}));
      max_numel = std::max(max_numel, rows * cols);
    }
    const auto owners = plan_tensor_owners(s, dp);
    ASSERT_TRUE(owners.has_value());
    EXPECT_EQ(*owners, *plan_tensor_owners(s, dp));
    V load(static_cast<std::size_t>(dp), 0);
    for (std::size_t i = 0; i < s.size(); ++i) {
      ASSERT_GE((*owners)[i], 0);
      ASSERT_LT((*owners)[i], dp);
      load[static_cast<std::size_t>((*owners)[i])] += s[i].numel();
    }
    // Greedy list scheduling: each tensor went to a least-loaded rank, so the spread of the final
    // loads is at most the largest tensor.
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    EXPECT_LE(*hi - *lo, max_numel);
    const auto layout = build_for_tensor_atomic(s, dp, *owners);
    ASSERT_TRUE(layout.has_value()) << layout.error().message();
    EXPECT_TRUE(validate_for_tensor_atomic(*layout).ok());
    for (std::int64_t k = 0; k < dp; ++k) {
      EXPECT_EQ(layout->rank_size(k), load[static_cast<std::size_t>(k)]);
    }
  }
}

}  // namespace
}  // namespace fsdp
