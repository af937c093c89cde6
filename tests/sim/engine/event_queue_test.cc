// SPDX-License-Identifier: Apache-2.0
#include "sim/engine/event_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
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

}  // namespace
}  // namespace fsdp::sim
