// SPDX-License-Identifier: Apache-2.0
// GlobalLayout::make invariants (fsdp-behaviour.md §1.2) and the derived accessors.
#include "core/layout/global_layout.h"

#include "tests/core/layout/layout_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace fsdp {
namespace {

using testing::is_error;
using testing::shapes;
using V = std::vector<std::int64_t>;

Expected<GlobalLayout> make(std::vector<Shape> s, V offsets, std::int64_t size, V ro) {
  return GlobalLayout::make(std::move(s), std::move(offsets), size, std::move(ro));
}

TEST(GlobalLayoutTest, AcceptsT1) {
  const auto got = make(shapes({{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}}), {0, 12, 32, 28, 48}, 60,
                        {0, 12, 24, 36, 48});
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(got->num_tensors(), 5);
  EXPECT_EQ(got->dp_size(), 5);
  EXPECT_EQ(got->size(), 60);
  EXPECT_EQ(got->rank_size(0), 12);
  EXPECT_EQ(got->rank_size(4), 12);
  EXPECT_TRUE(got->has_equal_shard_sizes());
  EXPECT_EQ(got->get_tensor_range(2), (Range{32, 16}));
  EXPECT_EQ(got->get_tensor_range(2).end(), 48);
}

TEST(GlobalLayoutTest, RankSizesWithEmptyAndLastSegments) {
  const auto got =
      make(shapes({{4, 4}, {3}, {2, 6}, {7, 3}}), {12, 28, 0, 31}, 52, {0, 12, 28, 28, 52});
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(got->rank_size(0), 12);
  EXPECT_EQ(got->rank_size(1), 16);
  EXPECT_EQ(got->rank_size(2), 0);
  EXPECT_EQ(got->rank_size(3), 24);
  EXPECT_EQ(got->rank_size(4), 0);
  EXPECT_FALSE(got->has_equal_shard_sizes());
}

TEST(GlobalLayoutTest, EqualShardSizesTrivialCases) {
  EXPECT_TRUE(make(shapes({{5}}), {0}, 7, {0})->has_equal_shard_sizes());
  EXPECT_TRUE(make({}, {}, 0, {0, 0, 0})->has_equal_shard_sizes());
  EXPECT_FALSE(make({}, {}, 5, {0, 0, 0})->has_equal_shard_sizes());
}

TEST(GlobalLayoutTest, GapsAndUnorderedOffsetsAreAllowed) {
  EXPECT_TRUE(make(shapes({{2}, {3}}), {10, 2}, 20, {0, 10}).has_value());
}

TEST(GlobalLayoutTest, ZeroNumelRangesOverlapNothing) {
  // Inside another tensor, at the same start as another, at size.
  EXPECT_TRUE(make(shapes({{10}, {0, 4}, {0}, {0, 2}}), {0, 5, 0, 10}, 10, {0}).has_value());
}

TEST(GlobalLayoutTest, RejectsNegativeSize) {
  EXPECT_TRUE(is_error(make({}, {}, -1, {0}), ErrorCode::kInvalidArgument,
                       {"layout size must be non-negative", "got -1"}));
}

TEST(GlobalLayoutTest, RejectsOffsetCountMismatch) {
  EXPECT_TRUE(is_error(make(shapes({{2}, {3}}), {0}, 5, {0}), ErrorCode::kInvalidArgument,
                       {"2 tensor shapes but 1 tensor offsets"}));
}

TEST(GlobalLayoutTest, RejectsBadRankOffsets) {
  EXPECT_TRUE(
      is_error(make({}, {}, 5, {}), ErrorCode::kInvalidArgument, {"rank_to_offset is empty"}));
  EXPECT_TRUE(is_error(make({}, {}, 5, {1, 2}), ErrorCode::kInvalidArgument,
                       {"rank 0 offset is 1", "expected 0"}));
  EXPECT_TRUE(is_error(make({}, {}, 10, {0, 6, 4}), ErrorCode::kInvalidArgument,
                       {"rank 2 offset 4 is below rank 1 offset 6", "non-decreasing"}));
  EXPECT_TRUE(is_error(make({}, {}, 10, {0, 6, 12}), ErrorCode::kInvalidArgument,
                       {"rank 2 offset 12 exceeds layout size 10"}));
}

TEST(GlobalLayoutTest, RejectsTensorOutsideLayout) {
  EXPECT_TRUE(is_error(make(shapes({{2}, {4, 4}}), {0, -4}, 20, {0}), ErrorCode::kInvalidArgument,
                       {"tensor 1 shape (4, 4)", "offset is -4", "non-negative"}));
  EXPECT_TRUE(is_error(make(shapes({{2}, {4, 4}}), {0, 8}, 20, {0}), ErrorCode::kInvalidArgument,
                       {"tensor 1 shape (4, 4)", "[8, 8 + 16)", "exceeds layout size 20"}));
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_TRUE(is_error(make(shapes({{4}}), {max - 1}, max, {0}), ErrorCode::kInvalidArgument,
                       {"tensor 0 shape (4,)", "exceeds layout size"}));
}

TEST(GlobalLayoutTest, RejectsOverlap) {
  EXPECT_TRUE(is_error(make(shapes({{4, 4}, {2, 6}, {3}}), {10, 0, 26}, 40, {0}),
                       ErrorCode::kInvalidArgument,
                       {"tensor 0 shape (4, 4) range [10, 26) overlaps tensor 1 shape (2, 6) "
                        "range [0, 12)",
                        "expected a start >= 12"}));
  EXPECT_TRUE(is_error(make(shapes({{4}, {4}}), {3, 3}, 10, {0}), ErrorCode::kInvalidArgument,
                       {"tensor 1 shape (4,) range [3, 7) overlaps tensor 0"}));
}

// The builders' fast path: a start order that describes the layout is accepted as make would;
// an order that is wrong, incomplete or repeats a tensor never lets an overlap through (make's
// general check decides, with its error), and never rejects a valid layout.
TEST(GlobalLayoutTest, StartOrderHintGivesMakesResult) {
  using Order = std::vector<std::uint32_t>;
  const auto with_order = [](std::vector<Shape> s, V offsets, std::int64_t size, Order order) {
    return internal::make_layout_with_start_order(std::move(s), std::move(offsets), size, {0},
                                                  order);
  };
  // Tensor 1 [0, 12), tensor 2 (empty), tensor 0 [12, 28), tensor 3 [28, 31).
  const std::vector<Shape> ok = shapes({{4, 4}, {2, 6}, {0}, {3}});
  const V ok_offsets = {12, 0, 5, 28};
  const auto expected = make(ok, ok_offsets, 40, {0});
  ASSERT_TRUE(expected.has_value());
  for (const Order& order : {Order{1, 0, 3}, Order{0, 1, 3}, Order{1, 0}, Order{1, 0, 3, 3},
                             Order{1, 1, 3}, Order{1, 0, 9}, Order{}}) {
    const auto got = with_order(ok, ok_offsets, 40, order);
    ASSERT_TRUE(got.has_value()) << got.error().message();
    EXPECT_EQ(*got, *expected);
  }
  // Tensor 0 [10, 26) overlaps tensor 1 [0, 12): no order, right or wrong, hides it.
  for (const Order& order : {Order{1, 0, 2}, Order{0, 1, 2}, Order{1, 2}, Order{1, 1, 2}}) {
    EXPECT_TRUE(is_error(with_order(shapes({{4, 4}, {2, 6}, {3}}), {10, 0, 26}, 40, order),
                         ErrorCode::kInvalidArgument,
                         {"tensor 0 shape (4, 4) range [10, 26) overlaps tensor 1 shape (2, 6) "
                          "range [0, 12)"}));
  }
}

TEST(GlobalLayoutTest, EqualityComparesAllFields) {
  const auto a = make(shapes({{2}, {3}}), {0, 2}, 6, {0, 3});
  const auto b = make(shapes({{2}, {3}}), {0, 2}, 6, {0, 3});
  const auto c = make(shapes({{2}, {3}}), {0, 2}, 6, {0, 2});
  EXPECT_EQ(*a, *b);
  EXPECT_FALSE(*a == *c);
}

}  // namespace
}  // namespace fsdp
