// SPDX-License-Identifier: Apache-2.0
// The O(n log n) PADDED builder against the literal quadratic transcription of the reference
// (reference_row_atomic.h) on seeded random inputs: offsets and sizes must be identical.
#include "core/layout/layout_builder.h"
#include "core/layout/layout_validation.h"
#include "tests/core/layout/layout_test_util.h"
#include "tests/core/layout/reference_row_atomic.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace fsdp {
namespace {

struct Scenario {
  std::vector<std::int64_t> row_sizes;  // drawn uniformly
  std::int64_t max_row_blocks;          // dim 0 = block * uniform[0, max_row_blocks]
  int max_tensors;
  double zero_rows;  // probability of dim 0 == 0
};

std::int64_t pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

Shape random_shape(std::mt19937_64& rng, const Scenario& sc, std::int64_t block) {
  const std::int64_t row = sc.row_sizes[static_cast<std::size_t>(
      pick(rng, 0, static_cast<std::int64_t>(sc.row_sizes.size()) - 1))];
  std::int64_t rows = block * pick(rng, 1, sc.max_row_blocks);
  if (std::bernoulli_distribution(sc.zero_rows)(rng)) {
    rows = 0;
  }
  const std::int64_t kind = pick(rng, 0, 2);
  if (row == 1 && kind == 0) {
    return testing::shape({rows});
  }
  if (kind == 1) {
    // Split the row into two dims when it has a non-trivial divisor.
    for (std::int64_t d = 2; d * d <= row; ++d) {
      if (row % d == 0) {
        return testing::shape({rows, d, row / d});
      }
    }
  }
  return testing::shape({rows, row});
}

void check_against_reference(const std::vector<Shape>& shapes, std::int64_t dp, std::int64_t block,
                             std::uint64_t seed) {
  std::int64_t ref_size = -1;
  const auto ref = testing::reference_row_atomic_offsets(shapes, dp, block, &ref_size);
  const auto got = build_for_row_atomic(shapes, dp, block);
  ASSERT_TRUE(ref.has_value()) << "seed " << seed;
  ASSERT_TRUE(got.has_value()) << "seed " << seed << ": " << got.error().message();
  ASSERT_EQ(got->tensor_to_offset(), *ref)
      << "seed " << seed << " dp " << dp << " block " << block << " tensors " << shapes.size();
  ASSERT_EQ(got->size(), ref_size) << "seed " << seed;
  ASSERT_EQ(got->dp_size(), dp);
  for (std::int64_t k = 0; k < dp; ++k) {
    ASSERT_EQ(got->rank_to_offset()[static_cast<std::size_t>(k)], k * (ref_size / dp));
  }
  ASSERT_TRUE(validate_for_row_atomic(*got, block).ok()) << "seed " << seed;
}

void run_scenario(const Scenario& sc, int iterations, std::uint64_t base_seed) {
  for (int it = 0; it < iterations; ++it) {
    const std::uint64_t seed = base_seed + static_cast<std::uint64_t>(it);
    std::mt19937_64 rng(seed);
    const std::int64_t block = pick(rng, 1, 4);
    const std::int64_t dp = pick(rng, 1, 6);
    const auto n = static_cast<std::size_t>(pick(rng, 0, sc.max_tensors));
    std::vector<Shape> shapes;
    shapes.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      shapes.push_back(random_shape(rng, sc, block));
    }
    check_against_reference(shapes, dp, block, seed);
    if (::testing::Test::HasFatalFailure()) {
      return;
    }
  }
}

TEST(LayoutBuilderDifferentialTest, SmallChunkManyConjugates) {
  run_scenario({{1, 2, 3, 4, 6, 12}, 8, 40, 0.1}, 1500, 1000);
}

TEST(LayoutBuilderDifferentialTest, ManyDistinctRowSizes) {
  run_scenario({{1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 18, 20, 24, 30, 36, 40, 45, 60}, 12, 60, 0.1},
               1000, 5000);
}

TEST(LayoutBuilderDifferentialTest, ArbitraryRowSizes) {
  run_scenario({{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 6, 30, 0.15}, 1000, 9000);
}

TEST(LayoutBuilderDifferentialTest, MostlyZeroNumel) {
  run_scenario({{1, 2, 3, 4, 6, 8, 12}, 5, 40, 0.6}, 500, 13000);
}

TEST(LayoutBuilderDifferentialTest, LargeInputs) {
  run_scenario({{1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 16, 20, 24, 30}, 20, 1500, 0.05}, 10, 17000);
}

TEST(LayoutBuilderDifferentialTest, WideChunkUsesInt64Records) {
  // Row sizes of k * 2^32 make the chunk 12 * 2^32 >= 2^32 - 1, so the builder's records, trees and
  // fragment sort take their 64-bit form instead of the uint32 one the other scenarios use.
  constexpr std::int64_t kWide = std::int64_t{1} << 32;
  run_scenario({{kWide, 2 * kWide, 3 * kWide, 4 * kWide, 6 * kWide, 12 * kWide}, 8, 40, 0.1}, 300,
               21000);
}

TEST(LayoutBuilderDifferentialTest, RepeatedAlignmentFailures) {
  // Chunk 12. (7,2) leaves gap [14, 24); its conjugate (8,2) starts at 20, so the gap is [14, 20)
  // of length 6: (1,6) needs pad(14, 6) = 18 and fails every time while (1,4) fits at 16. Many
  // identical failing fragments must be skipped in every gap and still end up in the same tail.
  std::vector<Shape> shapes;
  for (int i = 0; i < 200; ++i) {
    shapes.push_back(testing::shape({7, 2}));
    shapes.push_back(testing::shape({8, 2}));
    shapes.push_back(testing::shape({1, 6}));
    if (i % 3 == 0) {
      shapes.push_back(testing::shape({1, 4}));
      shapes.push_back(testing::shape({0, 12}));
    }
  }
  for (std::int64_t dp = 1; dp <= 3; ++dp) {
    check_against_reference(shapes, dp, 1, 0);
  }
}

}  // namespace
}  // namespace fsdp
