// SPDX-License-Identifier: Apache-2.0
// The worked vectors of fsdp-behaviour.md §2.5 (T1-T17, TA1-TA2, U1-U2), the §2 error vectors and the
// overflow behaviour of every builder.
#include "core/layout/layout_builder.h"

#include "core/layout/layout_validation.h"
#include "tests/core/layout/layout_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace fsdp {
namespace {

using testing::is_error;
using testing::rows_per_rank;
using testing::shapes;
using V = std::vector<std::int64_t>;
using M = std::vector<std::vector<std::int64_t>>;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

void expect_layout(const Expected<GlobalLayout>& got, const V& offsets, std::int64_t size,
                   const V& rank_to_offset) {
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(got->tensor_to_offset(), offsets);
  EXPECT_EQ(got->size(), size);
  EXPECT_EQ(got->rank_to_offset(), rank_to_offset);
}

Expected<GlobalLayout> padded(const std::vector<Shape>& s, std::int64_t dp,
                              std::int64_t block = 1) {
  return build_for_row_atomic(s, dp, block);
}

Expected<GlobalLayout> unpadded(const std::vector<Shape>& s, std::int64_t dp,
                                std::int64_t block = 1) {
  return build_for_row_atomic_unpadding(s, dp, block);
}

// ---- PADDED (§2.2) -----------------------------------------------------------------------------

TEST(LayoutBuilderTest, T1FiveRankExample) {
  const auto got = padded(shapes({{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}}), 5);
  expect_layout(got, {0, 12, 32, 28, 48}, 60, {0, 12, 24, 36, 48});
  EXPECT_EQ(
      rows_per_rank(*got),
      (M{{2, 0, 0, 0, 0}, {0, 3, 0, 0, 0}, {0, 1, 1, 1, 0}, {0, 0, 3, 0, 0}, {0, 0, 0, 0, 1}}));
  EXPECT_TRUE(validate_for_row_atomic(*got).ok());
}

TEST(LayoutBuilderTest, T2ConjugateAndTailFragment) {
  expect_layout(padded(shapes({{5, 4}, {2, 6}, {3}}), 2), {0, 24, 20}, 48, {0, 24});
}

TEST(LayoutBuilderTest, T3FragmentAlignedUpInGap) {
  expect_layout(padded(shapes({{4, 4}, {1, 6}}), 2), {0, 18}, 24, {0, 12});
}

TEST(LayoutBuilderTest, T4RowsSplitAtRankBoundary) {
  const auto got = padded(shapes({{4, 4}, {2, 4}}), 2);
  expect_layout(got, {0, 16}, 24, {0, 12});
  EXPECT_EQ(rows_per_rank(*got), (M{{3, 0}, {1, 2}}));
}

TEST(LayoutBuilderTest, T5EightRanks) {
  expect_layout(padded(shapes({{8, 4}}), 8), {0}, 32, {0, 4, 8, 12, 16, 20, 24, 28});
}

TEST(LayoutBuilderTest, T6SizeMultipleOfChunkTimesDp) {
  expect_layout(padded(shapes({{7, 3}, {2, 5}, {7}}), 2), {0, 30, 21}, 60, {0, 30});
}

TEST(LayoutBuilderTest, T7ElementsPerRank) {
  const auto got = padded(shapes({{6, 3}, {4, 2}, {2, 2}}), 3);
  expect_layout(got, {0, 18, 26}, 36, {0, 12, 24});
  EXPECT_EQ(testing::elements_per_rank(*got), (M{{12, 0, 0}, {6, 6, 0}, {0, 2, 4}}));
}

TEST(LayoutBuilderTest, T8SingleTensorThreeRanks) {
  const auto got = padded(shapes({{5, 4}}), 3);
  expect_layout(got, {0}, 24, {0, 8, 16});
  EXPECT_EQ(testing::elements_per_rank(*got), (M{{8}, {8}, {4}}));
}

TEST(LayoutBuilderTest, T9FragmentTooBigForGapGoesToTail) {
  expect_layout(padded(shapes({{5, 4}, {2, 6}, {4, 4}, {1, 3}}), 2), {0, 36, 20, 48}, 72, {0, 36});
}

TEST(LayoutBuilderTest, T10ConjugateThenGapFillThenTail) {
  expect_layout(padded(shapes({{5, 4}, {7, 2}, {1, 2}, {1, 6}}), 2), {0, 22, 20, 36}, 48, {0, 24});
}

TEST(LayoutBuilderTest, T11LastRankAllPadding) {
  const auto got = padded(shapes({{3, 4}, {5, 4}, {2, 12}}), 4);
  expect_layout(got, {0, 12, 36}, 96, {0, 24, 48, 72});
  EXPECT_EQ(rows_per_rank(*got)[3], (V{0, 0, 0}));
}

TEST(LayoutBuilderTest, T12AllFragmentsTailInNumelOrder) {
  expect_layout(padded(shapes({{2, 3}, {2, 2}, {1, 3}, {1, 2}, {5}}), 3), {0, 12, 18, 22, 6}, 36,
                {0, 12, 24});
}

TEST(LayoutBuilderTest, T13OneDimensionalRegular) {
  expect_layout(padded(shapes({{4, 3}, {18}}), 2), {0, 12}, 30, {0, 15});
}

TEST(LayoutBuilderTest, T14ZeroNumelTensorAtSize) {
  expect_layout(padded(shapes({{1, 12}, {0, 4}, {2, 6}}), 2), {0, 24, 12}, 24, {0, 12});
}

TEST(LayoutBuilderTest, T15BlockTwo) {
  const auto got = padded(shapes({{4, 6}, {8, 4}}), 2, 2);
  expect_layout(got, {0, 24}, 96, {0, 48});
  EXPECT_EQ(rows_per_rank(*got), (M{{4, 6}, {0, 2}}));
  EXPECT_TRUE(validate_for_row_atomic(*got, 2).ok());
}

TEST(LayoutBuilderTest, T16BlockThirtyTwo) {
  expect_layout(padded(shapes({{64, 32}, {32, 64}, {32, 32}}), 4, 32), {0, 2048, 4096}, 8192,
                {0, 2048, 4096, 6144});
}

TEST(LayoutBuilderTest, T17NoTensors) {
  expect_layout(padded({}, 3), {}, 0, {0, 0, 0});
}

TEST(LayoutBuilderTest, ZeroNumelFragmentPlacedAtGapEnd) {
  // Chunk 24: (8,4) leaves gap [32, 48); (4,4) fills it exactly, (1,6) no longer fits, the
  // zero-numel (0,8) still fits at pad(48, 8) = 48 <= 48; (1,6) goes to the tail at 48.
  expect_layout(padded(shapes({{8, 4}, {0, 8}, {4, 4}, {1, 6}}), 1), {0, 48, 32, 48}, 72, {0});
}

TEST(LayoutBuilderTest, ZeroNumelFragmentsGoToAlignedGapPosition) {
  // Chunk 12: (5,4) leaves gap [20, 24); (0,3) lands at pad(20, 3) = 21, then (0,1) at 21.
  expect_layout(padded(shapes({{5, 4}, {1, 12}, {0, 3}, {0, 1}}), 1), {0, 24, 21, 21}, 36, {0});
}

TEST(LayoutBuilderTest, DispatchesOnShardLayout) {
  const auto s = shapes({{2, 6}, {4, 4}, {1, 2}});
  expect_layout(build_row_atomic_layout(s, 2, 1, ShardLayout::kPadded), {0, 12, 28}, 48, {0, 24});
  expect_layout(build_row_atomic_layout(s, 2, 1, ShardLayout::kUnpadded), {0, 12, 28}, 30, {0, 16});
}

// ---- UNPADDED (§2.3) ---------------------------------------------------------------------------

TEST(LayoutBuilderTest, U1SeedExample) {
  const auto got = unpadded(shapes({{2, 6}, {4, 4}, {1, 2}}), 2);
  expect_layout(got, {0, 12, 28}, 30, {0, 16});
  EXPECT_EQ(got->rank_size(0), 16);
  EXPECT_EQ(got->rank_size(1), 14);
  EXPECT_TRUE(validate_for_row_atomic_unpadded(*got).ok());
}

TEST(LayoutBuilderTest, U2TieGoesToLowerCandidate) {
  const auto got = unpadded(shapes({{96, 32}, {32, 64}}), 4, 32);
  expect_layout(got, {0, 3072}, 5120, {0, 1024, 2048, 3072});
  EXPECT_TRUE(validate_for_row_atomic_unpadded(*got, 32).ok());
}

TEST(LayoutBuilderTest, UnpaddedEmptySegments) {
  // One 10-element row over 4 ranks: ideals 2.5, 5 (tie), 7.5 -> 0, 0, 10.
  expect_layout(unpadded(shapes({{1, 10}}), 4), {0}, 10, {0, 0, 0, 10});
}

TEST(LayoutBuilderTest, UnpaddedZeroNumelTensorsNeverContainAPoint) {
  // Ideal 5 lies in (3,2) [0,6): candidates 4 and 6 tie -> 4.
  expect_layout(unpadded(shapes({{0, 4}, {3, 2}, {0, 5}, {2, 2}}), 2), {0, 0, 6, 6}, 10, {0, 4});
}

TEST(LayoutBuilderTest, UnpaddedNoTensors) {
  expect_layout(unpadded({}, 3), {}, 0, {0, 0, 0});
}

TEST(LayoutBuilderTest, UnpaddedIdealNeverRoundedNearInt64Max) {
  // k * size overflows int64; the exact comparison still rounds 2/3 * (2^63 - 1) up.
  expect_layout(unpadded(shapes({{kMax}}), 3), {0}, kMax,
                {0, 3074457345618258602, 6148914691236517205});
  expect_layout(unpadded(shapes({{1, kMax}}), 3), {0}, kMax, {0, 0, kMax});
}

// ---- TensorAtomic (§2.4) -----------------------------------------------------------------------

TEST(LayoutBuilderTest, TA1OwnersPackedByRank) {
  const V owners{1, 3, 0, 3};
  const auto got = build_for_tensor_atomic(shapes({{4, 4}, {3}, {2, 6}, {7, 3}}), 5, owners);
  expect_layout(got, {12, 28, 0, 31}, 52, {0, 12, 28, 28, 52});
  EXPECT_TRUE(validate_for_tensor_atomic(*got).ok());
}

TEST(LayoutBuilderTest, TA2SeedExample) {
  const V owners{0, 1, 1};
  expect_layout(build_for_tensor_atomic(shapes({{4, 4}, {2, 6}, {1, 2}}), 2, owners), {0, 16, 28},
                30, {0, 16});
}

TEST(LayoutBuilderTest, TensorAtomicNoTensors) {
  expect_layout(build_for_tensor_atomic({}, 3, {}), {}, 0, {0, 0, 0});
}

TEST(LayoutBuilderTest, TensorAtomicOwnerCountMismatch) {
  const auto s = shapes({{4, 4}, {2, 6}});
  for (const V& owners : {V{}, V{0}, V{0, 1, 0}}) {
    EXPECT_TRUE(is_error(
        build_for_tensor_atomic(s, 2, owners), ErrorCode::kInvalidArgument,
        {"number of tensor owners", "expected 2", "got " + std::to_string(owners.size())}));
  }
}

TEST(LayoutBuilderTest, TensorAtomicOwnerOutOfRange) {
  const auto s = shapes({{4, 4}, {2, 6}});
  EXPECT_TRUE(is_error(build_for_tensor_atomic(s, 2, V{0, -1}), ErrorCode::kInvalidArgument,
                       {"tensor 1 shape (2, 6)", "integer within the range", "[0, 2)", "got -1"}));
  EXPECT_TRUE(is_error(build_for_tensor_atomic(s, 2, V{2, 0}), ErrorCode::kInvalidArgument,
                       {"tensor 0 shape (4, 4)", "[0, 2)", "got 2"}));
  EXPECT_TRUE(is_error(build_for_tensor_atomic(s, 0, V{0, 0}), ErrorCode::kInvalidArgument,
                       {"dp size must be positive", "got 0"}));
}

TEST(LayoutBuilderTest, TensorAtomicSizeOverflow) {
  const auto s = shapes({{1, std::int64_t{1} << 62}, {1, std::int64_t{1} << 62}});
  EXPECT_TRUE(is_error(build_for_tensor_atomic(s, 2, V{1, 1}), ErrorCode::kOutOfRange,
                       {"rank 1", "tensor 1 shape (1, 4611686018427387904)"}));
  EXPECT_TRUE(is_error(build_for_tensor_atomic(s, 2, V{0, 1}), ErrorCode::kOutOfRange,
                       {"overflows int64"}));
}

// ---- errors (§2.2 steps 1-2, shared by PADDED and UNPADDED) ------------------------------------

// The span overloads (the builders are overloaded on an rvalue vector too).
using SpanBuilder = Expected<GlobalLayout> (*)(std::span<const Shape>, std::int64_t, std::int64_t);
constexpr SpanBuilder kPadded = build_for_row_atomic;
constexpr SpanBuilder kUnpadded = build_for_row_atomic_unpadding;

TEST(LayoutBuilderTest, RejectsNonPositiveDpAndBlock) {
  const auto s = shapes({{4, 4}});
  for (const SpanBuilder build : {kPadded, kUnpadded}) {
    EXPECT_TRUE(is_error(build(s, 0, 1), ErrorCode::kInvalidArgument,
                         {"dp size must be positive", "got 0"}));
    EXPECT_TRUE(is_error(build(s, -3, 1), ErrorCode::kInvalidArgument, {"got -3"}));
    EXPECT_TRUE(is_error(build(s, 2, 0), ErrorCode::kInvalidArgument,
                         {"block size must be positive", "got 0"}));
  }
}

TEST(LayoutBuilderTest, RejectsDimZeroNotMultipleOfBlock) {
  const auto s = shapes({{4, 4}, {3, 5}});
  for (const SpanBuilder build : {kPadded, kUnpadded}) {
    EXPECT_TRUE(is_error(
        build(s, 2, 2), ErrorCode::kInvalidArgument,
        {"tensor 1 shape (3, 5)", "block size 2", "dim 0 is 3", "expected a multiple of 2"}));
  }
}

TEST(LayoutBuilderTest, RejectsZeroRowSize) {
  const auto s = shapes({{2, 2}, {4, 0}});
  for (const SpanBuilder build : {kPadded, kUnpadded}) {
    EXPECT_TRUE(is_error(build(s, 2, 1), ErrorCode::kInvalidArgument,
                         {"tensor 1 shape (4, 0)", "row size is 0", "zero-sized non-leading dims",
                          "expected a positive row size"}));
  }
}

TEST(LayoutBuilderTest, RejectsZeroDimShape) {
  const std::vector<Shape> s{testing::shape({3}), Shape()};
  for (const SpanBuilder build : {kPadded, kUnpadded}) {
    EXPECT_TRUE(is_error(build(s, 2, 1), ErrorCode::kInvalidArgument,
                         {"tensor 1 shape ()", "0 dims", "expected at least 1 dim"}));
  }
}

TEST(LayoutBuilderTest, ShapeErrorsComeInIdOrder) {
  const auto s = shapes({{2, 0}, {3, 5}});
  EXPECT_TRUE(is_error(padded(s, 2, 2), ErrorCode::kInvalidArgument, {"tensor 0 shape (2, 0)"}));
}

// ---- overflow ----------------------------------------------------------------------------------

TEST(LayoutBuilderTest, ChunkLcmOverflowNamesTensor) {
  // lcm(2^31 - 1, 2^32) fits int64; times 3 does not.
  const auto s = shapes({{1, 2147483647}, {1, std::int64_t{1} << 32}, {1, 3}, {1, 5}});
  EXPECT_TRUE(is_error(padded(s, 2), ErrorCode::kOutOfRange,
                       {"chunk size overflows int64", "tensor 2 shape (1, 3)",
                        "lcm(9223372032559808512, alignment 3)"}));
}

TEST(LayoutBuilderTest, ShapeErrorBeatsLcmOverflow) {
  // The reference computes in Python ints, so it would report the shape error.
  const auto s = shapes({{1, 2147483647}, {1, std::int64_t{1} << 32}, {1, 3}, {1, 0}});
  EXPECT_TRUE(is_error(padded(s, 2), ErrorCode::kInvalidArgument, {"tensor 3 shape (1, 0)"}));
}

TEST(LayoutBuilderTest, AlignmentOverflow) {
  const auto s = shapes({{0, 4}});
  const std::int64_t block = std::int64_t{1} << 62;
  EXPECT_TRUE(is_error(padded(s, 1, block), ErrorCode::kOutOfRange,
                       {"tensor 0 shape (0, 4)", "alignment overflows int64"}));
  EXPECT_TRUE(
      is_error(row_atomic_alignments(s, block), ErrorCode::kOutOfRange, {"tensor 0 shape (0, 4)"}));
}

TEST(LayoutBuilderTest, SizeNearInt64MaxBuildsForOneRank) {
  expect_layout(padded(shapes({{1, kMax}}), 1), {0}, kMax, {0});
}

TEST(LayoutBuilderTest, FinalPaddingOverflow) {
  EXPECT_TRUE(is_error(padded(shapes({{1, kMax}}), 2), ErrorCode::kOutOfRange,
                       {"chunk 9223372036854775807", "dp size 2"}));
}

TEST(LayoutBuilderTest, RegularSumOverflow) {
  const auto s = shapes({{1, std::int64_t{1} << 62}, {2, std::int64_t{1} << 61}});
  EXPECT_TRUE(is_error(padded(s, 1), ErrorCode::kOutOfRange,
                       {"tensor 1 shape (2, 2305843009213693952)", "overflows int64"}));
}

TEST(LayoutBuilderTest, ChunkPaddingOverflow) {
  // chunk = lcm(2^60, 3 * 2^59) = 3 * 2^60; 7 * 2^60 pads to 9 * 2^60 > int64.
  const auto s = shapes({{7, std::int64_t{1} << 60}, {1, 3 * (std::int64_t{1} << 59)}});
  EXPECT_TRUE(is_error(padded(s, 1), ErrorCode::kOutOfRange,
                       {"padding tensor 0 shape (7, 1152921504606846976)"}));
}

TEST(LayoutBuilderTest, UnpaddedSizeOverflow) {
  const auto s = shapes({{1, std::int64_t{1} << 62}, {2, std::int64_t{1} << 61}});
  EXPECT_TRUE(is_error(unpadded(s, 2), ErrorCode::kOutOfRange,
                       {"tensor 1 shape (2, 2305843009213693952)", "overflows int64"}));
}

TEST(LayoutBuilderTest, DpBeyondInt32Ranks) {
  EXPECT_TRUE(is_error(padded(shapes({{4}}), std::int64_t{1} << 40), ErrorCode::kOutOfRange,
                       {"dp size must be at most 2147483647", "got 1099511627776"}));
}

// ---- alignments --------------------------------------------------------------------------------

TEST(LayoutBuilderTest, RowAtomicAlignments) {
  const auto got = row_atomic_alignments(shapes({{2, 6}, {4, 4}, {7}, {0, 3, 5}}), 2);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, (V{12, 8, 2, 30}));
  EXPECT_TRUE(is_error(row_atomic_alignments(std::vector<Shape>{Shape()}, 1),
                       ErrorCode::kInvalidArgument, {"tensor 0 shape ()"}));
  EXPECT_TRUE(is_error(row_atomic_alignments(shapes({{1}}), 0), ErrorCode::kInvalidArgument,
                       {"block size must be positive"}));
}

}  // namespace
}  // namespace fsdp
