// SPDX-License-Identifier: Apache-2.0
// Arena: zeroed blocks, high-water marks per class, the log, and stream-ordered reuse through the
// fence of a block's last use.
#include "backends/exec/arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace fsdp::exec {
namespace {

constexpr StreamKind kC = StreamKind::kCompute;
constexpr StreamKind kAg = StreamKind::kAllGather;
constexpr StreamKind kRs = StreamKind::kReduceScatter;

TEST(ArenaTest, CountsLiveBytesAndHighWaterPerClass) {
  HostMemory memory;
  Arena arena(&memory);
  void* a = arena.allocate(100, BufferClass::kUnshardedWeights, kAg, 0, 1, 0).value();
  void* b = arena.allocate(40, BufferClass::kPartialGrads, kC, 0, 2, 1).value();
  void* c = arena.allocate(60, BufferClass::kUnshardedWeights, kAg, 0, 3, 2).value();
  EXPECT_EQ(arena.live_bytes(BufferClass::kUnshardedWeights), 160);
  EXPECT_EQ(arena.live_bytes_total(), 200);
  arena.release(a, Fence{}, kC, 0, 4, 0);
  arena.release(c, Fence{}, kC, 0, 5, 2);
  EXPECT_EQ(arena.live_bytes(BufferClass::kUnshardedWeights), 0);
  EXPECT_EQ(arena.high_water(BufferClass::kUnshardedWeights), 160);
  EXPECT_EQ(arena.high_water(BufferClass::kPartialGrads), 40);
  EXPECT_EQ(arena.high_water_total(), 200);
  arena.release(b, Fence{}, kRs, 0, 6, 1);
  const std::vector<ArenaRecord> log = arena.log();
  ASSERT_EQ(log.size(), 6U);
  EXPECT_TRUE(log[0].is_alloc);
  EXPECT_EQ(log[0].stream, kAg);
  EXPECT_EQ(log[2].live_bytes, 200);
  EXPECT_FALSE(log[5].is_alloc);
  EXPECT_EQ(log[5].live_bytes, 0);
  EXPECT_EQ(log[5].buffer, 1);
  EXPECT_EQ(log[5].stream, kRs);
}

TEST(ArenaTest, ReusesABlockOnlyWhereItsFenceAllowsTheNewUsersStream) {
  HostMemory memory;
  Arena arena(&memory);
  void* a = arena.allocate(64, BufferClass::kActivations, kAg, 0, 0, 0).value();
  std::memset(a, 0xff, 64);
  bool done = false;
  std::vector<StreamKind> asked;
  arena.release(a, [&](StreamKind user) { asked.push_back(user); return done; }, kC, 0, 1, 0);
  void* b = arena.allocate(64, BufferClass::kActivations, kRs, 0, 2, 1).value();
  EXPECT_NE(a, b);  // the fence refused
  ASSERT_EQ(asked.size(), 1U);
  EXPECT_EQ(asked[0], kRs) << "the fence is asked for the new user's stream";
  done = true;
  arena.release(b, Fence{}, kRs, 0, 3, 1);
  void* c = arena.allocate(64, BufferClass::kActivations, kAg, 0, 4, 2).value();
  EXPECT_EQ(c, a) << "the oldest cached block whose fence allows the stream comes first";
  EXPECT_EQ(arena.reserved_bytes(), 128);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(static_cast<unsigned char*>(c)[i], 0) << "blocks come back zeroed";
  }
  arena.release(c, Fence{}, kAg, 0, 5, 2);
}

// A fence that is always safe once it has made the new user's stream wait (as the CUDA device's
// does with cudaStreamWaitEvent) lets the same schedule reserve exactly its live peak, whatever
// the host saw: reuse no longer depends on timing.
TEST(ArenaTest, StreamOrderedFencesReserveThePeakNotTheSum) {
  HostMemory memory;
  Arena arena(&memory);
  std::vector<std::pair<StreamKind, StreamKind>> waits;  // (released on, used on) pairs
  auto fence_of = [&](StreamKind released_on) {
    return Fence([&waits, released_on](StreamKind user) {
      if (user != released_on) waits.emplace_back(released_on, user);
      return true;
    });
  };
  for (int layer = 0; layer < 8; ++layer) {
    void* w = arena.allocate(1000, BufferClass::kUnshardedWeights, kAg, 0, 2 * layer, 0).value();
    arena.release(w, fence_of(kC), kC, 0, 2 * layer + 1, 0);
  }
  EXPECT_EQ(arena.reserved_bytes(), 1000);
  EXPECT_EQ(arena.high_water_total(), 1000);
  ASSERT_EQ(waits.size(), 7U);  // every reuse after the first allocation crossed streams
  EXPECT_EQ(waits[0], std::make_pair(kC, kAg));
}

TEST(ArenaTest, ResolvesProvisionalTimesOnce) {
  HostMemory memory;
  Arena arena(&memory);
  std::int64_t ticket = 0;
  arena.set_clock([&](StreamKind) { return -(++ticket); });
  void* a = arena.allocate(8, BufferClass::kActivations, kC, 0, 0, 0).value();
  arena.release(a, Fence{}, kC, 0, 1, 0);
  arena.resolve_times([](std::int64_t t) { return -t * 100; });
  void* b = arena.allocate(8, BufferClass::kActivations, kC, 0, 2, 1).value();
  arena.resolve_times([](std::int64_t t) { return -t * 1000; });
  arena.release(b, Fence{}, kC, 0, 3, 1);
  const std::vector<ArenaRecord> log = arena.log();
  ASSERT_EQ(log.size(), 4U);
  EXPECT_EQ(log[0].time_ns, 100);
  EXPECT_EQ(log[1].time_ns, 200);
  EXPECT_EQ(log[2].time_ns, 3000);  // resolved by the second call only
  EXPECT_EQ(log[3].time_ns, -4);    // not resolved yet
}

TEST(ArenaTest, RejectsNegativeSizes) {
  HostMemory memory;
  Arena arena(&memory);
  auto p = arena.allocate(-1, BufferClass::kActivations, kC, 0, 0, 7);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message().find("buffer 7"), std::string::npos);
}

}  // namespace
}  // namespace fsdp::exec
