// SPDX-License-Identifier: Apache-2.0
// Layout statistics checked by hand on T1, U1 and TA1.
#include "core/layout/layout_stats.h"

#include "core/layout/layout_builder.h"
#include "tests/core/layout/layout_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace fsdp {
namespace {

using testing::is_error;
using testing::shapes;

TEST(LayoutStatsTest, T1GapAndPadding) {
  // T1: data 52; P3 ends at 30 and P2 starts at 32 (gap 2); P4 ends at 54, size 60 (pad 6).
  const auto l = *build_for_row_atomic(shapes({{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}}), 5);
  const LayoutStats st = compute_layout_stats(l);
  EXPECT_EQ(st.size, 60);
  EXPECT_EQ(st.data_elements, 52);
  EXPECT_EQ(st.gap_elements, 2);
  EXPECT_EQ(st.pad_elements, 6);
  EXPECT_EQ(st.min_rank_elements, 12);
  EXPECT_EQ(st.max_rank_elements, 12);
  EXPECT_DOUBLE_EQ(st.mean_rank_elements, 12.0);
  EXPECT_DOUBLE_EQ(st.imbalance, 1.0);
  ASSERT_EQ(st.ranks.size(), 5u);
  // offset, elements, data, gap, pad, tensors
  EXPECT_EQ(st.ranks[0], (RankStats{0, 12, 12, 0, 0, 1}));
  EXPECT_EQ(st.ranks[1], (RankStats{12, 12, 12, 0, 0, 1}));
  EXPECT_EQ(st.ranks[2], (RankStats{24, 12, 10, 2, 0, 3}));
  EXPECT_EQ(st.ranks[3], (RankStats{36, 12, 12, 0, 0, 1}));
  EXPECT_EQ(st.ranks[4], (RankStats{48, 12, 6, 0, 6, 1}));
}

TEST(LayoutStatsTest, U1UnequalSegments) {
  const auto l = *build_for_row_atomic_unpadding(shapes({{2, 6}, {4, 4}, {1, 2}}), 2);
  const LayoutStats st = compute_layout_stats(l);
  EXPECT_EQ(st.data_elements, 30);
  EXPECT_EQ(st.gap_elements, 0);
  EXPECT_EQ(st.pad_elements, 0);
  EXPECT_EQ(st.min_rank_elements, 14);
  EXPECT_EQ(st.max_rank_elements, 16);
  EXPECT_DOUBLE_EQ(st.mean_rank_elements, 15.0);
  EXPECT_DOUBLE_EQ(st.imbalance, 16.0 / 15.0);
  EXPECT_EQ(st.ranks[0], (RankStats{0, 16, 16, 0, 0, 2}));
  EXPECT_EQ(st.ranks[1], (RankStats{16, 14, 14, 0, 0, 2}));
}

TEST(LayoutStatsTest, TA1EmptySegmentsHoldNoTensors) {
  const std::vector<std::int64_t> owners{1, 3, 0, 3};
  const auto l = *build_for_tensor_atomic(shapes({{4, 4}, {3}, {2, 6}, {7, 3}}), 5, owners);
  const LayoutStats st = compute_layout_stats(l);
  EXPECT_EQ(st.min_rank_elements, 0);
  EXPECT_EQ(st.max_rank_elements, 24);
  EXPECT_DOUBLE_EQ(st.mean_rank_elements, 10.4);
  EXPECT_DOUBLE_EQ(st.imbalance, 24.0 / 10.4);
  EXPECT_EQ(st.ranks[0], (RankStats{0, 12, 12, 0, 0, 1}));
  EXPECT_EQ(st.ranks[1], (RankStats{12, 16, 16, 0, 0, 1}));
  EXPECT_EQ(st.ranks[2], (RankStats{28, 0, 0, 0, 0, 0}));
  EXPECT_EQ(st.ranks[3], (RankStats{28, 24, 24, 0, 0, 2}));
  EXPECT_EQ(st.ranks[4], (RankStats{52, 0, 0, 0, 0, 0}));
}

TEST(LayoutStatsTest, TensorSpanningEmptySegment) {
  // ro (0, 10, 10, 20): tensor [5, 15) touches ranks 0 and 2 but not the empty rank 1.
  const auto l = *GlobalLayout::make(shapes({{10}}), {5}, 20, {0, 10, 10, 20});
  const LayoutStats st = compute_layout_stats(l);
  EXPECT_EQ(st.gap_elements, 5);
  EXPECT_EQ(st.pad_elements, 5);
  EXPECT_EQ(st.ranks[0], (RankStats{0, 10, 5, 5, 0, 1}));
  EXPECT_EQ(st.ranks[1], (RankStats{10, 0, 0, 0, 0, 0}));
  EXPECT_EQ(st.ranks[2], (RankStats{10, 10, 5, 0, 5, 1}));
  EXPECT_EQ(st.ranks[3], (RankStats{20, 0, 0, 0, 0, 0}));
}

TEST(LayoutStatsTest, EmptyLayout) {
  const LayoutStats st = compute_layout_stats(*build_for_row_atomic({}, 3));
  EXPECT_EQ(st.size, 0);
  EXPECT_EQ(st.data_elements, 0);
  EXPECT_DOUBLE_EQ(st.imbalance, 1.0);
  EXPECT_EQ(st.ranks.size(), 3u);
}

TEST(LayoutStatsTest, MaxRankBytes) {
  const auto l = *build_for_row_atomic_unpadding(shapes({{2, 6}, {4, 4}, {1, 2}}), 2);
  EXPECT_EQ(*max_rank_bytes(l, 4), 64);
  EXPECT_TRUE(is_error(max_rank_bytes(l, 0), ErrorCode::kInvalidArgument,
                       {"bytes per element must be positive", "got 0"}));
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const auto big = *build_for_row_atomic(shapes({{1, max}}), 1);
  EXPECT_TRUE(is_error(max_rank_bytes(big, 2), ErrorCode::kOutOfRange,
                       {"rank 0 bytes overflow int64", "9223372036854775807 elements of 2 bytes"}));
}

}  // namespace
}  // namespace fsdp
