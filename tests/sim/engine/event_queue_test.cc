// SPDX-License-Identifier: Apache-2.0
#include "sim/engine/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace fsdp::sim {
namespace {

TEST(EventQueueTest, PopsByTimeThenInsertionOrder) {
  EventQueue q;
  q.push(SimTime::ps(5), EventKind::kOpDone, 1, 0);
  q.push(SimTime::ps(3), EventKind::kOpDone, 2, 0);
  q.push(SimTime::ps(5), EventKind::kStreamReady, 3, 0);
  q.push(SimTime::ps(3), EventKind::kOpDone, 4, 0);
  std::vector<std::uint32_t> order;
  while (!q.empty()) {
    order.push_back(q.pop().subject);
  }
  EXPECT_EQ(order, (std::vector<std::uint32_t>{2, 4, 1, 3}));
}

TEST(EventQueueTest, SortsManyRandomEvents) {
  EventQueue q;
  std::mt19937_64 rng(7);
  for (std::uint32_t i = 0; i < 5000; ++i) {
    q.push(SimTime::ps(static_cast<std::int64_t>(rng() % 100)), EventKind::kOpDone, i, 0);
  }
  Event prev = q.pop();
  while (!q.empty()) {
    const Event e = q.pop();
    ASSERT_TRUE(prev.t < e.t || (prev.t == e.t && prev.seq < e.seq));
    prev = e;
  }
}

// Pushes and pops interleaved, as the simulator does, against a sorted reference of
// (time, push order); many equal times exercise the tie-break at every level of the heap.
TEST(EventQueueTest, InterleavedPushPopMatchesSortedReference) {
  EventQueue q;
  std::vector<std::pair<std::int64_t, std::uint32_t>> pending;  // (time, subject = push order)
  std::mt19937_64 rng(11);
  std::uint32_t next = 0;
  std::int64_t now = 0;
  for (int round = 0; round < 6000; ++round) {
    if (pending.empty() || rng() % 3 != 0) {
      const std::int64_t t = now + static_cast<std::int64_t>(rng() % 8);
      q.push(SimTime::ps(t), EventKind::kOpDone, next, 0);
      pending.emplace_back(t, next++);
      continue;
    }
    const auto best = std::min_element(pending.begin(), pending.end());
    const Event e = q.pop();
    ASSERT_EQ(e.t.ps(), best->first);
    ASSERT_EQ(e.subject, best->second);
    now = e.t.ps();
    pending.erase(best);
  }
  EXPECT_EQ(q.size(), pending.size());
}

}  // namespace
}  // namespace fsdp::sim
