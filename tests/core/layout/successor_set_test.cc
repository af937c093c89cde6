// SPDX-License-Identifier: Apache-2.0
// internal::SuccessorSet against std::set on seeded random insert/erase/query
// sequences, across universe sizes that end inside, at the edge of and just
// past each level of words.
#include "core/layout/internal/successor_set.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <set>

namespace fsdp::internal {
namespace {

std::size_t model_next(const std::set<std::size_t>& model, std::size_t i) {
  const auto it = model.lower_bound(i);
  return it == model.end() ? SuccessorSet::kNone : *it;
}

TEST(SuccessorSetTest, EmptySetHasNoSuccessor) {
  for (const std::size_t n : {0U, 1U, 64U, 65U, 5000U}) {
    const SuccessorSet set(n);
    EXPECT_EQ(set.universe(), n);
    EXPECT_EQ(set.next_at_or_after(0), SuccessorSet::kNone) << "n=" << n;
    EXPECT_EQ(set.next_at_or_after(n), SuccessorSet::kNone) << "n=" << n;
  }
}

TEST(SuccessorSetTest, FindsMembersAcrossWordAndLevelBoundaries) {
  SuccessorSet set(64 * 64 * 64 + 1);  // three levels plus a top word
  const std::size_t last = set.universe() - 1;
  set.insert(last);
  EXPECT_EQ(set.next_at_or_after(0), last);
  set.insert(4096);
  EXPECT_EQ(set.next_at_or_after(0), 4096U);
  EXPECT_EQ(set.next_at_or_after(4096), 4096U);
  EXPECT_EQ(set.next_at_or_after(4097), last);
  set.insert(63);
  set.insert(64);
  EXPECT_EQ(set.next_at_or_after(0), 63U);
  EXPECT_EQ(set.next_at_or_after(64), 64U);
  set.erase(64);
  EXPECT_EQ(set.next_at_or_after(64), 4096U);
  set.erase(4096);
  set.erase(4096);  // idempotent
  EXPECT_EQ(set.next_at_or_after(64), last);
  EXPECT_TRUE(set.contains(63));
  EXPECT_FALSE(set.contains(64));
  EXPECT_EQ(set.next_at_or_after(last + 1), SuccessorSet::kNone);
}

TEST(SuccessorSetTest, MatchesOrderedSetOnRandomOperations) {
  std::mt19937_64 rng(20261129);
  for (const std::size_t n : {1U, 2U, 63U, 64U, 65U, 4095U, 4096U, 4097U, 300000U}) {
    SuccessorSet set(n);
    std::set<std::size_t> model;
    std::uniform_int_distribution<std::size_t> pick(0, n - 1);
    std::uniform_int_distribution<std::size_t> query(0, n + 1);
    for (int step = 0; step < 20000; ++step) {
      const std::size_t i = pick(rng);
      switch (rng() % 3) {
        case 0:
          set.insert(i);
          model.insert(i);
          break;
        case 1:
          set.erase(i);
          model.erase(i);
          break;
        default: {
          const std::size_t q = query(rng);
          ASSERT_EQ(set.next_at_or_after(q), model_next(model, q)) << "n=" << n << " q=" << q;
          ASSERT_EQ(set.contains(i), model.count(i) == 1) << "n=" << n << " i=" << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fsdp::internal
