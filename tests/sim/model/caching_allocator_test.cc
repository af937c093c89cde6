// SPDX-License-Identifier: Apache-2.0
#include "sim/model/caching_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

namespace fsdp::sim {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

// The allocator's rules written as plainly as possible, to check its pools against: every block
// of every segment in one list, best fit by a full scan for the least (size, segment, offset).
class ReferenceAllocator {
 public:
  using Placement = CachingAllocator::Placement;

  // Returns the index of the live block in blocks_.
  std::size_t allocate(int stream, std::int64_t bytes) {
    const std::int64_t size = CachingAllocator::round_size(bytes);
    const bool small = size <= CachingAllocator::kSmallSize;
    std::size_t best = blocks_.size();
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      const Block& b = blocks_[i];
      const Segment& s = segments_[static_cast<std::size_t>(b.segment)];
      if (b.free && b.size >= size && s.stream == stream && s.small == small &&
          (best == blocks_.size() ||
           std::tuple(b.size, b.segment, b.offset) <
               std::tuple(blocks_[best].size, blocks_[best].segment, blocks_[best].offset))) {
        best = i;
      }
    }
    if (best == blocks_.size()) {
      const std::int64_t bytes_reserved = CachingAllocator::segment_size(size);
      segments_.push_back(Segment{stream, small});
      reserved_ += bytes_reserved;
      blocks_.push_back(Block{static_cast<std::int32_t>(segments_.size() - 1), 0, bytes_reserved,
                              /*free=*/true, /*gone=*/false});
    }
    Block& b = blocks_[best];
    const std::int64_t remaining = b.size - size;
    const bool split = small ? remaining >= CachingAllocator::kMinBlockSize
                             : remaining > CachingAllocator::kSmallSize;
    if (split) {
      b.size = size;
      blocks_.push_back(
          Block{b.segment, b.offset + size, remaining, /*free=*/true, /*gone=*/false});
    }
    blocks_[best].free = false;
    allocated_ += blocks_[best].size;
    return best;
  }

  void release(std::size_t i) {
    Block& b = blocks_[i];
    allocated_ -= b.size;
    b.free = true;
    // Merge with the free blocks that end where b starts or start where b ends.
    for (bool merged = true; merged;) {
      merged = false;
      for (Block& o : blocks_) {
        if (&o == &b || o.gone || !o.free || o.segment != b.segment) {
          continue;
        }
        if (o.offset + o.size == b.offset || b.offset + b.size == o.offset) {
          b.offset = std::min(b.offset, o.offset);
          b.size += o.size;
          o.gone = true;
          o.free = false;
          merged = true;
        }
      }
    }
  }

  Placement placement(std::size_t i) const {
    return Placement{blocks_[i].segment, blocks_[i].offset, blocks_[i].size};
  }
  std::int64_t reserved_bytes() const { return reserved_; }
  std::int64_t allocated_bytes() const { return allocated_; }
  std::size_t cached_blocks() const {
    std::size_t n = 0;
    for (const Block& b : blocks_) {
      n += b.free && !b.gone ? 1u : 0u;
    }
    return n;
  }

 private:
  struct Block {
    std::int32_t segment = 0;
    std::int64_t offset = 0;
    std::int64_t size = 0;
    bool free = true;
    bool gone = false;  // merged into a neighbour
  };
  struct Segment {
    int stream = 0;
    bool small = false;
  };
  std::vector<Block> blocks_;
  std::vector<Segment> segments_;
  std::int64_t reserved_ = 0;
  std::int64_t allocated_ = 0;
};

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

// Runs `steps` random allocations (alloc_percent % of the steps, of `sizes`, on two streams) and
// releases on both allocators, asserting after every step that each allocation landed on the same
// segment and offset and that the reserved, allocated and cached counts agree.
void RunAgainstPlainScan(std::mt19937_64& rng, const std::vector<std::int64_t>& sizes, int steps,
                         int alloc_percent) {
  CachingAllocator a;
  ReferenceAllocator ref;
  struct Live {
    CachingAllocator::Handle handle;
    std::size_t ref = 0;
  };
  std::vector<Live> live;
  for (int step = 0; step < steps; ++step) {
    if (live.empty() || static_cast<int>(rng() % 100) < alloc_percent) {
      const int stream = static_cast<int>(rng() % 2);
      const std::int64_t bytes = sizes[rng() % sizes.size()];
      const Live l{a.allocate(stream, bytes), ref.allocate(stream, bytes)};
      ASSERT_EQ(a.placement(l.handle), ref.placement(l.ref)) << "step " << step << " bytes "
                                                             << bytes;
      live.push_back(l);
    } else {
      const std::size_t k = rng() % live.size();
      a.release(live[k].handle);
      ref.release(live[k].ref);
      live[k] = live.back();
      live.pop_back();
    }
    ASSERT_EQ(a.reserved_bytes(), ref.reserved_bytes()) << "step " << step;
    ASSERT_EQ(a.allocated_bytes(), ref.allocated_bytes()) << "step " << step;
    ASSERT_EQ(a.cached_blocks(), ref.cached_blocks()) << "step " << step;
  }
}

// Random alloc/free sequences from a few repeated sizes (as FSDP's buffers are), small and large,
// on two streams: every allocation lands on the same segment and offset as in the reference, so
// the pools keep best fit's order, tie-breaks, splits and merges exactly.
TEST(CachingAllocatorTest, PlacesEveryBlockLikeAPlainBestFitScan) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    // A few sizes per run, so many cached blocks share one size and the tie-break decides.
    std::vector<std::int64_t> sizes;
    for (int k = 0; k < 2 + static_cast<int>(seed % 5); ++k) {
      switch (rng() % 4) {
        case 0:
          sizes.push_back(static_cast<std::int64_t>(1 + rng() % (kMiB / 2)));
          break;
        case 1:
          sizes.push_back(static_cast<std::int64_t>(kMiB + rng() % (9 * kMiB)));
          break;
        case 2:
          sizes.push_back(static_cast<std::int64_t>(10 * kMiB + rng() % (60 * kMiB)));
          break;
        default:
          sizes.push_back(static_cast<std::int64_t>(512 * (1 + rng() % 8)));
          break;
      }
    }
    RunAgainstPlainScan(rng, sizes, /*steps=*/3000, /*alloc_percent=*/55);
    if (HasFatalFailure()) {
      return;
    }
  }
}

// Many distinct sizes, so pools hold more than kMaxClasses (32) size classes: empty classes are
// dropped and the exact-size index is rebuilt, and every choice must still match the scan.
TEST(CachingAllocatorTest, ManyDistinctSizesMatchAPlainBestFitScan) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    std::vector<std::int64_t> sizes;
    for (int k = 0; k < 120; ++k) {
      sizes.push_back(k % 2 == 0 ? static_cast<std::int64_t>(1 + rng() % kMiB)
                                 : static_cast<std::int64_t>(kMiB + rng() % (30 * kMiB)));
    }
    RunAgainstPlainScan(rng, sizes, /*steps=*/4000, /*alloc_percent=*/52);
    if (HasFatalFailure()) {
      return;
    }
  }
}

// Many cached blocks of one size, freed in random order and taken again: the tie-break by
// (segment, offset) decides every choice.
TEST(CachingAllocatorTest, ChoosesAmongManyEqualBlocksLikeAPlainBestFitScan) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    CachingAllocator a;
    ReferenceAllocator ref;
    std::vector<std::pair<CachingAllocator::Handle, std::size_t>> live;
    const std::int64_t bytes = seed % 2 == 0 ? 12 * kMiB : 256 * 1024;
    for (int round = 0; round < 6; ++round) {
      while (live.size() < 150) {
        live.emplace_back(a.allocate(0, bytes), ref.allocate(0, bytes));
        ASSERT_EQ(a.placement(live.back().first), ref.placement(live.back().second))
            << "seed " << seed << " round " << round;
      }
      std::shuffle(live.begin(), live.end(), rng);
      const std::size_t keep = rng() % 40;
      while (live.size() > keep) {
        a.release(live.back().first);
        ref.release(live.back().second);
        live.pop_back();
      }
      ASSERT_EQ(a.cached_blocks(), ref.cached_blocks()) << "seed " << seed << " round " << round;
      ASSERT_EQ(a.reserved_bytes(), ref.reserved_bytes()) << "seed " << seed << " round " << round;
    }
  }
}

}  // namespace
}  // namespace fsdp::sim
