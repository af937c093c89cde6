// SPDX-License-Identifier: Apache-2.0
// The validators of fsdp-behaviour.md §1.3 (row-atomic), §2.3 (relaxed unpadded rule) and §1.4 (tensor
// atomic): each failure names the tensor or rank with the expected and the actual value.
#include "core/layout/layout_validation.h"

#include "core/layout/layout_builder.h"
#include "tests/core/layout/layout_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace fsdp {
namespace {

using testing::is_error;
using testing::shapes;
using V = std::vector<std::int64_t>;

GlobalLayout make(std::vector<Shape> s, V offsets, std::int64_t size, V ro) {
  auto got = GlobalLayout::make(std::move(s), std::move(offsets), size, std::move(ro));
  EXPECT_TRUE(got.has_value()) << got.error().message();
  return std::move(got).value();
}

// ---- §1.3 ---------------------------------------------------------------------------------------

TEST(LayoutValidationTest, RowAtomicAcceptsBuiltLayouts) {
  const auto s = shapes({{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}});
  EXPECT_TRUE(validate_for_row_atomic(*build_for_row_atomic(s, 5)).ok());
  EXPECT_TRUE(
      validate_for_row_atomic(*build_for_row_atomic(shapes({{4, 6}, {8, 4}}), 2, 2), 2).ok());
  EXPECT_TRUE(validate_for_row_atomic(*build_for_row_atomic({}, 3)).ok());
}

TEST(LayoutValidationTest, RowAtomicRejectsNonPositiveBlock) {
  const auto layout = *build_for_row_atomic(shapes({{4, 4}}), 2);
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout, 0), ErrorCode::kInvalidArgument,
                       {"block size must be positive", "got 0"}));
}

TEST(LayoutValidationTest, RowAtomicRejectsUnequalSegments) {
  const auto layout = *build_for_row_atomic_unpadding(shapes({{2, 6}, {4, 4}, {1, 2}}), 2);
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout), ErrorCode::kInvalidArgument,
                       {"unequal rank segment sizes", "rank 1 has 14 elements", "expected 16"}));
}

TEST(LayoutValidationTest, RowAtomicChecksBlockBeforeSegments) {
  const auto layout = *build_for_row_atomic_unpadding(shapes({{2, 6}, {4, 4}, {1, 2}}), 2);
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout, -1), ErrorCode::kInvalidArgument,
                       {"block size must be positive"}));
}

TEST(LayoutValidationTest, RowAtomicRejectsZeroRowSize) {
  const auto layout = make(shapes({{2, 2}, {4, 0}}), {0, 4}, 4, {0});
  EXPECT_TRUE(
      is_error(validate_for_row_atomic(layout), ErrorCode::kInvalidArgument,
               {"tensor 1 shape (4, 0)", "incompatible with block size 1", "row size is 0"}));
}

TEST(LayoutValidationTest, RowAtomicRejectsDimZeroNotMultipleOfBlock) {
  const auto layout = make(shapes({{4, 6}, {3, 5}}), {0, 24}, 48, {0, 24});
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout, 2), ErrorCode::kInvalidArgument,
                       {"tensor 1 shape (3, 5)", "incompatible with block size 2", "dim 0 is 3"}));
}

TEST(LayoutValidationTest, RowAtomicRejectsZeroDimShape) {
  const auto layout = make(std::vector<Shape>{Shape()}, {0}, 2, {0});
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout), ErrorCode::kInvalidArgument,
                       {"tensor 0 shape ()", "0 dims"}));
}

TEST(LayoutValidationTest, RowAtomicRejectsMisalignedOffset) {
  const auto layout = make(shapes({{4, 4}, {1, 6}}), {0, 16}, 24, {0, 12});
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout), ErrorCode::kInvalidArgument,
                       {"tensor 1 shape (1, 6) offset 16 is incompatible with alignment 6",
                        "expected a multiple of 6", "got remainder 4"}));
}

TEST(LayoutValidationTest, RowAtomicRejectsRankOffsetOffChunk) {
  const auto layout = make(shapes({{4, 4}, {1, 6}}), {0, 18}, 26, {0, 13});
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout), ErrorCode::kInvalidArgument,
                       {"rank 1 offset 13 is incompatible with chunk size 12",
                        "expected a multiple of 12", "got remainder 1"}));
}

TEST(LayoutValidationTest, RowAtomicChunkOverflowIsOutOfRange) {
  // Alignments 2^31 - 1, 2^32 and 3: the lcm leaves int64 at tensor 2.
  const auto layout = make(shapes({{1, 2147483647}, {1, std::int64_t{1} << 32}, {1, 3}}),
                           {0, 4294967296, 8589934593}, 8589934596, {0});
  EXPECT_TRUE(is_error(validate_for_row_atomic(layout), ErrorCode::kOutOfRange,
                       {"chunk size overflows int64 at tensor 2 shape (1, 3)"}));
}

// ---- §2.3 relaxed rule --------------------------------------------------------------------------

TEST(LayoutValidationTest, UnpaddedAcceptsBuiltLayouts) {
  EXPECT_TRUE(validate_for_row_atomic_unpadded(
                  *build_for_row_atomic_unpadding(shapes({{2, 6}, {4, 4}, {1, 2}}), 2))
                  .ok());
  EXPECT_TRUE(validate_for_row_atomic_unpadded(
                  *build_for_row_atomic_unpadding(shapes({{96, 32}, {32, 64}}), 4, 32), 32)
                  .ok());
  // Boundaries at tensor starts and ends are fine.
  EXPECT_TRUE(validate_for_row_atomic_unpadded(
                  make(shapes({{2, 6}, {4, 4}, {1, 2}}), {0, 12, 28}, 30, {0, 12, 28}))
                  .ok());
}

TEST(LayoutValidationTest, UnpaddedRejectsBoundaryInsideRow) {
  const auto layout = make(shapes({{2, 6}, {4, 4}, {1, 2}}), {0, 12, 28}, 30, {0, 15});
  EXPECT_TRUE(is_error(validate_for_row_atomic_unpadded(layout), ErrorCode::kInvalidArgument,
                       {"rank 1 boundary 15 splits a row/block of tensor 1 shape (4, 4) at offset "
                        "12",
                        "multiple of 4", "got 3"}));
}

TEST(LayoutValidationTest, UnpaddedRejectsBoundaryInsideBlock) {
  // Boundary 16 is a row boundary of (4,4) but not a boundary of its 2-row blocks.
  const auto layout = make(shapes({{2, 6}, {4, 4}, {2, 2}}), {0, 12, 28}, 32, {0, 16});
  EXPECT_TRUE(is_error(validate_for_row_atomic_unpadded(layout, 2), ErrorCode::kInvalidArgument,
                       {"rank 1 boundary 16", "tensor 1 shape (4, 4)", "multiple of 8", "got 4"}));
}

TEST(LayoutValidationTest, UnpaddedRejectsGaps) {
  const auto layout = make(shapes({{2, 6}, {4, 4}, {1, 2}}), {0, 12, 30}, 32, {0, 16});
  EXPECT_TRUE(is_error(validate_for_row_atomic_unpadded(layout), ErrorCode::kInvalidArgument,
                       {"size is 32", "expected the sum of tensor numels 30"}));
}

TEST(LayoutValidationTest, UnpaddedRejectsBadShapes) {
  EXPECT_TRUE(is_error(validate_for_row_atomic_unpadded(make(shapes({{3, 5}}), {0}, 15, {0}), 2),
                       ErrorCode::kInvalidArgument, {"tensor 0 shape (3, 5)", "dim 0 is 3"}));
  EXPECT_TRUE(is_error(validate_for_row_atomic_unpadded(make(shapes({{3, 5}}), {0}, 15, {0}), 0),
                       ErrorCode::kInvalidArgument, {"block size must be positive"}));
}

// ---- §1.4 ---------------------------------------------------------------------------------------

TEST(LayoutValidationTest, TensorAtomicAcceptsBuiltLayouts) {
  const V owners{1, 3, 0, 3};
  EXPECT_TRUE(validate_for_tensor_atomic(
                  *build_for_tensor_atomic(shapes({{4, 4}, {3}, {2, 6}, {7, 3}}), 5, owners))
                  .ok());
}

TEST(LayoutValidationTest, TensorAtomicRejectsCrossingTensor) {
  const auto layout = make(shapes({{4, 4}, {2, 6}}), {0, 16}, 28, {0, 20});
  EXPECT_TRUE(is_error(validate_for_tensor_atomic(layout), ErrorCode::kInvalidArgument,
                       {"tensor 1 shape (2, 6) range [16, 28) crosses a rank segment boundary",
                        "rank 0 segment [0, 20)", "got end 28"}));
}

TEST(LayoutValidationTest, TensorAtomicUsesLastOfEqualRankOffsets) {
  // Tensor 1 starts at 12 where ranks 1 and 2 both start; rank 2 [12, 20) holds it.
  EXPECT_TRUE(validate_for_tensor_atomic(make(shapes({{12}, {8}}), {0, 12}, 20, {0, 12, 12})).ok());
}

TEST(LayoutValidationTest, TensorAtomicSkipsZeroNumelTensors) {
  EXPECT_TRUE(
      validate_for_tensor_atomic(make(shapes({{0, 4}, {3}, {3}}), {2, 0, 3}, 6, {0, 3})).ok());
}

}  // namespace
}  // namespace fsdp
