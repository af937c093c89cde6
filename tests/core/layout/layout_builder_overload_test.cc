// SPDX-License-Identifier: Apache-2.0
// The builders' two overloads: a span (the layout copies the shapes) and an rvalue vector (the
// layout takes the vector over) must give identical layouts and identical errors.
#include "core/layout/layout_builder.h"

#include "core/layout/owner_planner.h"
#include "tests/core/layout/layout_test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace fsdp {
namespace {

using testing::shape;
using testing::shapes;

std::int64_t pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// 1-, 2- and 3-D shapes (3-D shapes keep their dims on the heap), some with zero rows; dim 0 a
// multiple of block.
std::vector<Shape> random_shapes(std::mt19937_64& rng, std::int64_t block) {
  const auto n = static_cast<std::size_t>(pick(rng, 0, 300));
  std::vector<Shape> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t rows = pick(rng, 0, 5) == 0 ? 0 : block * pick(rng, 1, 40);
    switch (pick(rng, 0, 2)) {
      case 0:
        out.push_back(shape({rows}));
        break;
      case 1:
        out.push_back(shape({rows, pick(rng, 1, 24)}));
        break;
      default:
        out.push_back(shape({rows, pick(rng, 1, 4), pick(rng, 1, 6)}));
        break;
    }
  }
  return out;
}

// Builds through the span overload from `in`, then through the moving overload from a copy of
// it, and checks that the results are equal and that the layout holds the moved vector's buffer.
template <typename BySpan, typename ByMove>
void expect_same(const std::vector<Shape>& in, BySpan by_span, ByMove by_move) {
  const Expected<GlobalLayout> from_span = by_span(std::span<const Shape>(in));
  std::vector<Shape> handed = in;
  const Shape* buffer = handed.data();
  const Expected<GlobalLayout> from_move = by_move(std::move(handed));
  ASSERT_EQ(from_span.has_value(), from_move.has_value());
  if (!from_span.has_value()) {
    EXPECT_EQ(from_span.error().code(), from_move.error().code());
    EXPECT_EQ(from_span.error().message(), from_move.error().message());
    return;
  }
  EXPECT_EQ(*from_span, *from_move);
  EXPECT_EQ(from_move->tensor_shapes(), in);
  if (!in.empty()) {
    EXPECT_EQ(from_move->tensor_shapes().data(), buffer) << "the layout copied the shapes";
  }
}

void expect_all_builders_agree(const std::vector<Shape>& in, std::int64_t dp, std::int64_t block) {
  expect_same(
      in, [&](std::span<const Shape> s) { return build_for_row_atomic(s, dp, block); },
      [&](std::vector<Shape>&& v) { return build_for_row_atomic(std::move(v), dp, block); });
  expect_same(
      in, [&](std::span<const Shape> s) { return build_for_row_atomic_unpadding(s, dp, block); },
      [&](std::vector<Shape>&& v) {
        return build_for_row_atomic_unpadding(std::move(v), dp, block);
      });
  for (const ShardLayout kind : {ShardLayout::kPadded, ShardLayout::kUnpadded}) {
    expect_same(
        in, [&](std::span<const Shape> s) { return build_row_atomic_layout(s, dp, block, kind); },
        [&](std::vector<Shape>&& v) {
          return build_row_atomic_layout(std::move(v), dp, block, kind);
        });
  }
  const auto owners = plan_tensor_owners(in, dp);
  ASSERT_TRUE(owners.has_value()) << owners.error().message();
  expect_same(
      in, [&](std::span<const Shape> s) { return build_for_tensor_atomic(s, dp, *owners); },
      [&](std::vector<Shape>&& v) { return build_for_tensor_atomic(std::move(v), dp, *owners); });
}

TEST(LayoutBuilderOverloadTest, MovingOverloadsGiveTheSpanOverloadsLayouts) {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    const std::int64_t block = pick(rng, 1, 3);
    const std::int64_t dp = pick(rng, 1, 7);
    const std::vector<Shape> in = random_shapes(rng, block);
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    expect_all_builders_agree(in, dp, block);
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
  }
}

TEST(LayoutBuilderOverloadTest, SpecVectorT1) {
  // Spec §2.5 T1 through the moving overload, then both overloads for every builder.
  const auto got = build_for_row_atomic(shapes({{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}}), 5);
  ASSERT_TRUE(got.has_value()) << got.error().message();
  EXPECT_EQ(got->tensor_to_offset(), (std::vector<std::int64_t>{0, 12, 32, 28, 48}));
  EXPECT_EQ(got->size(), 60);
  EXPECT_EQ(got->rank_to_offset(), (std::vector<std::int64_t>{0, 12, 24, 36, 48}));
  expect_all_builders_agree(shapes({{2, 6}, {4, 4}, {4, 4}, {1, 2}, {1, 6}}), 5, 1);
}

TEST(LayoutBuilderOverloadTest, MovingOverloadsReportTheSameErrors) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  // 0-D shape; dim 0 not a multiple of the block; zero-sized row; lcm overflow; bad dp.
  expect_all_builders_agree(shapes({{4, 4}, {}}), 2, 1);
  expect_all_builders_agree(shapes({{4, 4}, {3, 2}}), 2, 2);
  expect_all_builders_agree(shapes({{4, 0}}), 2, 1);
  expect_all_builders_agree(shapes({{1, kMax / 2}, {1, kMax / 3}}), 2, 1);
  const auto bad_dp = [](std::int64_t dp) {
    expect_same(
        shapes({{4, 4}}), [&](std::span<const Shape> s) { return build_for_row_atomic(s, dp); },
        [&](std::vector<Shape>&& v) { return build_for_row_atomic(std::move(v), dp); });
  };
  bad_dp(0);
  bad_dp(-3);
}

TEST(LayoutBuilderOverloadTest, LvalueVectorIsCopiedNotTaken) {
  std::vector<Shape> in = shapes({{4, 4}, {2, 3, 5}, {8}});
  const std::vector<Shape> before = in;
  const auto layout = build_for_row_atomic(in, 2);
  ASSERT_TRUE(layout.has_value()) << layout.error().message();
  EXPECT_EQ(in, before);
  EXPECT_NE(layout->tensor_shapes().data(), in.data());
}

}  // namespace
}  // namespace fsdp
