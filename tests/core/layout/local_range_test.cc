// SPDX-License-Identifier: Apache-2.0
// Local ranges on multi-axis meshes (fsdp-behaviour.md §1.5) and the DBuffer.view() containment rule (§3.2).
#include "core/layout/local_range.h"

#include "core/layout/layout_builder.h"
#include "tests/core/layout/layout_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace fsdp {
namespace {

using testing::is_error;
using testing::shapes;
using P = std::vector<AxisPlacement>;
constexpr AxisPlacement S = AxisPlacement::kShard;
constexpr AxisPlacement R = AxisPlacement::kReplicate;
constexpr AxisPlacement A = AxisPlacement::kPartial;

// A dp4 layout with ro (0, 12, 24, 36) and size 48.
GlobalLayout dp4_layout() {
  auto got = build_for_row_atomic(shapes({{4, 12}}), 4);
  EXPECT_TRUE(got.has_value());
  EXPECT_EQ(got->rank_to_offset(), (std::vector<std::int64_t>{0, 12, 24, 36}));
  EXPECT_EQ(got->size(), 48);
  return std::move(got).value();
}

// Mesh (O=2 outer, I=2 inner) seen from (o, i).
MeshCoordinate mesh22(std::int64_t o, std::int64_t i) {
  return {{2, 2}, {o, i}};
}

Range range(const GlobalLayout& l, const MeshCoordinate& c, const P& p) {
  const auto got = get_local_range(l, c, p);
  EXPECT_TRUE(got.has_value()) << got.error().message();
  return got.has_value() ? *got : Range{-1, -1};
}

TEST(LocalRangeTest, ShardShardInnermostAxisIsMostSignificant) {
  const auto l = dp4_layout();
  EXPECT_EQ(range(l, mesh22(0, 0), {S, S}), (Range{0, 12}));
  EXPECT_EQ(range(l, mesh22(1, 0), {S, S}), (Range{12, 12}));
  EXPECT_EQ(range(l, mesh22(0, 1), {S, S}), (Range{24, 12}));
  EXPECT_EQ(range(l, mesh22(1, 1), {S, S}), (Range{36, 12}));
}

TEST(LocalRangeTest, ReplicateShardGivesContiguousSegments) {
  const auto l = dp4_layout();
  for (std::int64_t o = 0; o < 2; ++o) {
    EXPECT_EQ(range(l, mesh22(o, 0), {R, S}), (Range{0, 24}));
    EXPECT_EQ(range(l, mesh22(o, 1), {R, S}), (Range{24, 24}));
    EXPECT_EQ(range(l, mesh22(o, 1), {A, S}), (Range{24, 24}));
  }
}

TEST(LocalRangeTest, AllReplicateIsWholeBuffer) {
  const auto l = dp4_layout();
  EXPECT_EQ(range(l, mesh22(1, 1), {R, R}), (Range{0, 48}));
  EXPECT_EQ(range(l, mesh22(0, 1), {A, R}), (Range{0, 48}));
}

TEST(LocalRangeTest, TA1RankTwoIsEmpty) {
  const std::vector<std::int64_t> owners{1, 3, 0, 3};
  const auto l = *build_for_tensor_atomic(shapes({{4, 4}, {3}, {2, 6}, {7, 3}}), 5, owners);
  EXPECT_EQ(range(l, {{5}, {2}}, {S}), (Range{28, 0}));
  EXPECT_EQ(range(l, {{5}, {3}}, {S}), (Range{28, 24}));
}

TEST(LocalRangeTest, T5EightSegmentsOverFourRanks) {
  const auto l = *build_for_row_atomic(shapes({{8, 4}}), 8);
  for (std::int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(range(l, {{4}, {r}}, {S}), (Range{8 * r, 8}));
  }
}

TEST(LocalRangeTest, T5LayoutBuiltForTwoShardsOnFourRanks) {
  const auto l = *build_for_row_atomic(shapes({{8, 4}}), 2);
  EXPECT_TRUE(is_error(get_local_range(l, {{4}, {1}}, P{S}), ErrorCode::kInvalidArgument,
                       {"layout was built for 2 shards, which cannot be split evenly over 4"}));
  EXPECT_TRUE(is_error(get_local_range(l, {{2, 2}, {0, 1}}, P{S, S}), ErrorCode::kInvalidArgument,
                       {"built for 2 shards", "over 4"}));
  EXPECT_EQ(range(l, {{2, 2}, {1, 1}}, {R, S}), (Range{16, 16}));
}

TEST(LocalRangeTest, ShardPlacementsMustBeASuffix) {
  const auto l = dp4_layout();
  EXPECT_TRUE(is_error(get_local_range(l, mesh22(0, 0), P{S, R}), ErrorCode::kInvalidArgument,
                       {"suffix", "axis 0 is shard but axis 1 is replicate"}));
  EXPECT_TRUE(is_error(get_local_range(l, {{1, 2, 2}, {0, 0, 0}}, P{S, A, S}),
                       ErrorCode::kInvalidArgument, {"axis 1 is partial"}));
}

TEST(LocalRangeTest, RejectsMalformedCoordinates) {
  const auto l = dp4_layout();
  EXPECT_TRUE(is_error(get_local_range(l, mesh22(0, 0), P{S}), ErrorCode::kInvalidArgument,
                       {"expected 2 placements", "got 1"}));
  EXPECT_TRUE(is_error(get_local_range(l, {{2, 2}, {0}}, P{S, S}), ErrorCode::kInvalidArgument,
                       {"1 local ranks", "(2)"}));
  EXPECT_TRUE(is_error(get_local_range(l, {{2, 0}, {0, 0}}, P{S, S}), ErrorCode::kInvalidArgument,
                       {"mesh axis 1 size must be positive", "got 0"}));
  EXPECT_TRUE(is_error(get_local_range(l, mesh22(2, 0), P{S, S}), ErrorCode::kInvalidArgument,
                       {"mesh axis 0", "[0, 2)", "got 2"}));
  EXPECT_TRUE(is_error(get_local_range(l, mesh22(0, -1), P{S, S}), ErrorCode::kInvalidArgument,
                       {"mesh axis 1", "got -1"}));
}

TEST(LocalRangeTest, HfsdpOptimizerViewNestsInParameterRange) {
  const auto l = dp4_layout();
  for (std::int64_t o = 0; o < 2; ++o) {
    for (std::int64_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(check_view_contained(l, mesh22(o, i), P{R, S}, P{S, S}).ok());
      EXPECT_TRUE(check_view_contained(l, mesh22(o, i), P{R, R}, P{R, S}).ok());
      EXPECT_TRUE(check_view_contained(l, mesh22(o, i), P{S, S}, P{S, S}).ok());
    }
  }
}

TEST(LocalRangeTest, ViewToLargerRangeFails) {
  const auto l = dp4_layout();
  EXPECT_TRUE(is_error(
      check_view_contained(l, mesh22(1, 0), P{S, S}, P{R, R}), ErrorCode::kInvalidArgument,
      {"requires a range contained in its local buffer", "inside [12, 24)", "got [0, 48)"}));
  // ZeRO-1 style: parameter [S] with optimizer [R] fails.
  const auto flat = *build_for_row_atomic(shapes({{4, 12}}), 2);
  EXPECT_TRUE(is_error(check_view_contained(flat, {{2}, {1}}, P{S}, P{R}),
                       ErrorCode::kInvalidArgument, {"inside [24, 48)", "got [0, 48)"}));
}

TEST(LocalRangeTest, ViewPropagatesRangeErrors) {
  const auto l = dp4_layout();
  EXPECT_TRUE(is_error(check_view_contained(l, mesh22(0, 0), P{S, R}, P{S, S}),
                       ErrorCode::kInvalidArgument, {"suffix"}));
}

}  // namespace
}  // namespace fsdp
