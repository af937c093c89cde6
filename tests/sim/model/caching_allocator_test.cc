// SPDX-License-Identifier: Apache-2.0
#include "sim/model/caching_allocator.h"

#include <gtest/gtest.h>

namespace fsdp::sim {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

TEST(CachingAllocatorTest, RoundsBlocksAndSizesSegmentsLikePyTorch) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512);
  EXPECT_EQ(CachingAllocator::round_size(512), 512);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * kMiB + 512), 12 * kMiB);
}

TEST(CachingAllocatorTest, SmallRequestsShareOneTwoMiBSegment) {
  CachingAllocator a;
  a.allocate(0, 1000);
  a.allocate(0, 100);
  EXPECT_EQ(a.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(a.allocated_bytes(), 1024 + 512);
}

TEST(CachingAllocatorTest, LargeSegmentsAreSplitPerStreamOnly) {
  CachingAllocator a;
  a.allocate(0, 5 * kMiB);  // a 20 MiB segment, split
  a.allocate(0, 5 * kMiB);  // fits the 15 MiB remainder
  EXPECT_EQ(a.reserved_bytes(), 20 * kMiB);
  a.allocate(1, 5 * kMiB);  // another stream's pool: a new segment
  EXPECT_EQ(a.reserved_bytes(), 40 * kMiB);
  EXPECT_EQ(a.allocated_bytes(), 15 * kMiB);
}

TEST(CachingAllocatorTest, FreedBlocksAreReusedAndSegmentsNeverReturned) {
  CachingAllocator a;
  const auto h = a.allocate(0, 12 * kMiB);
  EXPECT_EQ(a.reserved_bytes(), 12 * kMiB);
  a.release(h);
  EXPECT_EQ(a.allocated_bytes(), 0);
  EXPECT_EQ(a.reserved_bytes(), 12 * kMiB);
  // 11 MiB reuses the cached 12 MiB block whole: a 1 MiB remainder is not split off.
  a.allocate(0, 11 * kMiB);
  EXPECT_EQ(a.reserved_bytes(), 12 * kMiB);
  EXPECT_EQ(a.allocated_bytes(), 12 * kMiB);
  // A larger request cannot use it: a new segment.
  a.allocate(0, 13 * kMiB);
  EXPECT_EQ(a.reserved_bytes(), 26 * kMiB);
}

TEST(CachingAllocatorTest, BestFitPicksTheSmallestCachedBlock) {
  CachingAllocator a;
  const auto big = a.allocate(0, 30 * kMiB);
  const auto small = a.allocate(0, 12 * kMiB);
  a.release(big);
  a.release(small);
  a.allocate(0, 12 * kMiB);  // takes the 12 MiB block, leaving 30 MiB free
  a.allocate(0, 30 * kMiB);
  EXPECT_EQ(a.reserved_bytes(), 42 * kMiB);
}

TEST(CachingAllocatorTest, NeighboursMergeWhenFreed) {
  CachingAllocator a;
  const auto x = a.allocate(0, 512 * 1024);
  const auto y = a.allocate(0, 512 * 1024);
  const auto z = a.allocate(0, 512 * 1024);
  a.release(x);
  a.release(z);
  a.release(y);  // merges with both neighbours and the tail into one 2 MiB block
  a.allocate(0, kMiB);
  a.allocate(0, kMiB);
  EXPECT_EQ(a.reserved_bytes(), 2 * kMiB);
}

TEST(CachingAllocatorTest, HandlesStayValidWhileBlockRecordsAreMergedAndReused) {
  CachingAllocator a;
  const auto x = a.allocate(0, 512 * 1024);
  const auto y = a.allocate(0, 512 * 1024);
  const auto z = a.allocate(0, 512 * 1024);
  EXPECT_EQ(a.cached_blocks(), 1u);  // the 512 KiB tail of the 2 MiB segment
  a.release(x);
  EXPECT_EQ(a.cached_blocks(), 2u);
  a.release(y);  // merges with x: its record is recycled
  EXPECT_EQ(a.cached_blocks(), 2u);
  const auto w = a.allocate(0, kMiB);  // exactly the merged block
  EXPECT_EQ(a.cached_blocks(), 1u);
  EXPECT_EQ(a.allocated_bytes(), kMiB + 512 * 1024);
  a.release(z);  // merges with the tail, not with the live w
  EXPECT_EQ(a.cached_blocks(), 1u);
  a.release(w);  // the whole segment is one free block again
  EXPECT_EQ(a.cached_blocks(), 1u);
  EXPECT_EQ(a.allocated_bytes(), 0);
  const auto u = a.allocate(0, kMiB);  // split off a reused record
  const auto v = a.allocate(0, kMiB);
  EXPECT_EQ(a.cached_blocks(), 0u);
  EXPECT_EQ(a.reserved_bytes(), 2 * kMiB);
  a.release(v);
  a.release(u);
  EXPECT_EQ(a.cached_blocks(), 1u);
  EXPECT_EQ(a.allocated_bytes(), 0);
}

}  // namespace
}  // namespace fsdp::sim
