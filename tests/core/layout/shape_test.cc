// SPDX-License-Identifier: Apache-2.0
// Shape's value semantics across its two storages (dims inline up to 2-D, on the heap from 3-D):
// copies, moves and assignments keep dims, numel and row size; ASan checks ownership.
#include "core/layout/shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace fsdp {
namespace {

// Every observable of a shape made from `dims`.
void expect_shape(const Shape& s, const std::vector<std::int64_t>& dims) {
  ASSERT_EQ(s.ndim(), static_cast<int>(dims.size()));
  std::int64_t numel = 1;
  std::int64_t row = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    EXPECT_EQ(s.dim(static_cast<int>(i)), dims[i]) << "dim " << i;
    EXPECT_EQ(s.dims()[i], dims[i]) << "dims()[" << i << "]";
    numel *= dims[i];
    if (i > 0) {
      row *= dims[i];
    }
  }
  EXPECT_EQ(s.dims().size(), dims.size());
  EXPECT_EQ(s.numel(), numel);
  if (!dims.empty()) {
    EXPECT_EQ(s.rows(), dims[0]);
    EXPECT_EQ(s.row_size(), row);
  }
}

const std::vector<std::vector<std::int64_t>>& sample_dims() {
  static const std::vector<std::vector<std::int64_t>> kDims = {
      {}, {7}, {3, 5}, {2, 3, 4}, {2, 0, 4}, {1, 2, 3, 4, 5, 6, 7, 8}, {6, 1, 1, 1}};
  return kDims;
}

TEST(ShapeStorageTest, MakeKeepsEveryDimForEachRank) {
  for (const auto& dims : sample_dims()) {
    SCOPED_TRACE(testing::PrintToString(dims));
    expect_shape(Shape::make(dims).value(), dims);
  }
}

TEST(ShapeStorageTest, CopiesAreIndependentEqualValues) {
  for (const auto& dims : sample_dims()) {
    SCOPED_TRACE(testing::PrintToString(dims));
    Shape copy;
    {
      const Shape original = Shape::make(dims).value();
      copy = original;
      const Shape constructed(original);  // NOLINT(performance-unnecessary-copy-initialization)
      EXPECT_EQ(constructed, original);
      expect_shape(constructed, dims);
    }
    expect_shape(copy, dims);  // outlives the original
  }
}

TEST(ShapeStorageTest, MovesTransferTheValue) {
  for (const auto& dims : sample_dims()) {
    SCOPED_TRACE(testing::PrintToString(dims));
    Shape source = Shape::make(dims).value();
    Shape moved(std::move(source));
    expect_shape(moved, dims);
    Shape target = Shape::make({9, 9, 9}).value();
    target = std::move(moved);
    expect_shape(target, dims);
    // A moved-from shape is still a valid value that can be reassigned.
    moved = target;  // NOLINT(bugprone-use-after-move)
    expect_shape(moved, dims);
  }
}

TEST(ShapeStorageTest, AssignmentAcrossStoragesAndToSelf) {
  Shape s = Shape::make({4, 3, 2}).value();
  const Shape flat = Shape::make({5, 6}).value();
  s = flat;  // heap -> inline
  expect_shape(s, {5, 6});
  s = Shape::make({2, 2, 2, 2}).value();  // inline -> heap (move)
  expect_shape(s, {2, 2, 2, 2});
  const Shape& alias = s;
  s = alias;  // self-copy
  expect_shape(s, {2, 2, 2, 2});
}

TEST(ShapeStorageTest, EqualityComparesDimsNotStorage) {
  EXPECT_EQ(Shape::make({2, 3, 4}).value(), Shape::make({2, 3, 4}).value());
  EXPECT_FALSE(Shape::make({2, 3, 4}).value() == Shape::make({2, 3, 5}).value());
  EXPECT_FALSE(Shape::make({2, 12}).value() == Shape::make({2, 3, 4}).value());
  EXPECT_FALSE(Shape::make({6}).value() == Shape::make({6, 1}).value());
  EXPECT_EQ(Shape(), Shape::make({}).value());
}

TEST(ShapeStorageTest, VectorsOfMixedShapesCopyAndGrow) {
  std::vector<Shape> shapes;
  for (int round = 0; round < 50; ++round) {  // reallocations move the elements
    for (const auto& dims : sample_dims()) {
      shapes.push_back(Shape::make(dims).value());
    }
  }
  const std::vector<Shape> copy = shapes;
  ASSERT_EQ(copy.size(), shapes.size());
  for (std::size_t i = 0; i < copy.size(); ++i) {
    expect_shape(copy[i], sample_dims()[i % sample_dims().size()]);
  }
  EXPECT_EQ(copy, shapes);
}

}  // namespace
}  // namespace fsdp
