// SPDX-License-Identifier: Apache-2.0
#include <cstdint>
#include <limits>

#include "core/base/checked_math.h"
#include "core/base/expected.h"
#include "core/layout/shape.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace {

Expected<int> half(int v) {
  if (v % 2 != 0) {
    return Error(ErrorCode::kInvalidArgument, "odd");
  }
  return v / 2;
}

Expected<int> quarter(int v) {
  FSDP_TRY(int h, half(v));
  FSDP_TRY(int q, half(h));
  return q;
}

TEST(ExpectedTest, TryPropagatesTheFirstError) {
  EXPECT_EQ(quarter(8).value(), 2);
  EXPECT_FALSE(quarter(6).has_value());
  EXPECT_EQ(quarter(6).error().message(), "odd");
}

TEST(ErrorTest, WithContextPrependsContext) {
  Error e(ErrorCode::kOutOfRange, "too big");
  EXPECT_EQ(e.with_context("while x").message(), "while x: too big");
}

TEST(CheckedMathTest, DetectsOverflow) {
  std::int64_t out = 0;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_FALSE(checked_add(kMax, 1, &out));
  EXPECT_FALSE(checked_mul(kMax / 2 + 1, 2, &out));
  EXPECT_TRUE(checked_lcm(4, 6, &out));
  EXPECT_EQ(out, 12);
  EXPECT_FALSE(checked_lcm(kMax, kMax - 1, &out));
  EXPECT_TRUE(checked_pad(13, 12, &out));
  EXPECT_EQ(out, 24);
  EXPECT_FALSE(checked_pad(kMax - 1, 12, &out));
}

TEST(ShapeTest, NumelAndRowSize) {
  auto s = Shape::make({4, 3, 2});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->numel(), 24);
  EXPECT_EQ(s->row_size(), 6);
  EXPECT_EQ(s->rows(), 4);
  EXPECT_EQ(to_string(*s), "(4, 3, 2)");
  EXPECT_EQ(to_string(Shape::make({18}).value()), "(18,)");
  EXPECT_EQ(to_string(Shape()), "()");
  EXPECT_EQ(Shape::make({0, 4})->numel(), 0);
  EXPECT_EQ(Shape::make({4, 0})->row_size(), 0);
}

TEST(ShapeTest, RejectsNegativeDimsAndOverflow) {
  auto neg = Shape::make({4, -1});
  ASSERT_FALSE(neg);
  EXPECT_EQ(neg.error().message(), "shape dim 1 is -1; expected a size >= 0");
  auto big = Shape::make({1LL << 40, 1LL << 40});
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code(), ErrorCode::kOutOfRange);
}

TEST(ShapeTest, ParsesXSeparatedDims) {
  EXPECT_EQ(parse_shape("2x6").value(), Shape::make({2, 6}).value());
  EXPECT_EQ(parse_shape("18").value(), Shape::make({18}).value());
  auto bad = parse_shape("2xa");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "shape '2xa' has dim 'a'; expected a non-negative integer");
  EXPECT_FALSE(parse_shape(""));
  EXPECT_FALSE(parse_shape("2x"));
  EXPECT_FALSE(parse_shape("99999999999999999999"));
}

}  // namespace
}  // namespace fsdp
