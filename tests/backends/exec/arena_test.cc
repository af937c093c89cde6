// SPDX-License-Identifier: Apache-2.0
// Arena: zeroed blocks, high-water marks per class, the log, and reuse only after the fence.
#include "backends/exec/arena.h"

#include <gtest/gtest.h>

#include <cstring>

namespace fsdp::exec {
namespace {

TEST(ArenaTest, CountsLiveBytesAndHighWaterPerClass) {
  HostMemory memory;
  Arena arena(&memory);
  void* a = arena.allocate(100, BufferClass::kUnshardedWeights, 0, 1, 0).value();
  void* b = arena.allocate(40, BufferClass::kPartialGrads, 0, 2, 1).value();
  void* c = arena.allocate(60, BufferClass::kUnshardedWeights, 0, 3, 2).value();
  EXPECT_EQ(arena.live_bytes(BufferClass::kUnshardedWeights), 160);
  EXPECT_EQ(arena.live_bytes_total(), 200);
  arena.release(a, Fence{}, 0, 4, 0);
  arena.release(c, Fence{}, 0, 5, 2);
  EXPECT_EQ(arena.live_bytes(BufferClass::kUnshardedWeights), 0);
  EXPECT_EQ(arena.high_water(BufferClass::kUnshardedWeights), 160);
  EXPECT_EQ(arena.high_water(BufferClass::kPartialGrads), 40);
  EXPECT_EQ(arena.high_water_total(), 200);
  arena.release(b, Fence{}, 0, 6, 1);
  const std::vector<ArenaRecord> log = arena.log();
  ASSERT_EQ(log.size(), 6U);
  EXPECT_TRUE(log[0].is_alloc);
  EXPECT_EQ(log[2].live_bytes, 200);
  EXPECT_FALSE(log[5].is_alloc);
  EXPECT_EQ(log[5].live_bytes, 0);
  EXPECT_EQ(log[5].buffer, 1);
}

TEST(ArenaTest, ReusesABlockOnlyAfterItsFenceCompletes) {
  HostMemory memory;
  Arena arena(&memory);
  void* a = arena.allocate(64, BufferClass::kActivations, 0, 0, 0).value();
  std::memset(a, 0xff, 64);
  bool done = false;
  arena.release(a, [&done] { return done; }, 0, 1, 0);
  void* b = arena.allocate(64, BufferClass::kActivations, 0, 2, 1).value();
  EXPECT_NE(a, b);  // the fence has not completed
  done = true;
  arena.release(b, Fence{}, 0, 3, 1);
  void* c = arena.allocate(64, BufferClass::kActivations, 0, 4, 2).value();
  EXPECT_TRUE(c == a || c == b);
  EXPECT_EQ(arena.reserved_bytes(), 128);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(static_cast<unsigned char*>(c)[i], 0) << "blocks come back zeroed";
  }
  arena.release(c, Fence{}, 0, 5, 2);
}

TEST(ArenaTest, RejectsNegativeSizes) {
  HostMemory memory;
  Arena arena(&memory);
  auto p = arena.allocate(-1, BufferClass::kActivations, 0, 0, 7);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message().find("buffer 7"), std::string::npos);
}

}  // namespace
}  // namespace fsdp::exec
