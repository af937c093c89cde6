// SPDX-License-Identifier: Apache-2.0
// CachingAllocator: a model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp)
// that turns the IR's exact allocations into the "reserved" bytes a user meets as an OOM: sizes
// rounded to 512 B; requests <= 1 MiB served from a small pool of 2 MiB segments; larger ones from
// a large pool whose segments are 20 MiB (requests < 10 MiB) or the request rounded to 2 MiB;
// best-fit reuse of cached blocks, splitting and merging; one pool pair per stream (a block freed
// on one stream is reused only by that stream); segments are never returned. Deterministic; not
// thread-safe. Formulas and sources: docs/design/simulator.md, "Reserved memory".
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "core/base/check.h"

namespace fsdp::sim {

class CachingAllocator {
 public:
  static constexpr std::int64_t kMinBlockSize = 512;
  static constexpr std::int64_t kSmallSize = 1 << 20;       // largest small-pool request
  static constexpr std::int64_t kSmallBuffer = 2 << 20;     // small-pool segment
  static constexpr std::int64_t kMinLargeAlloc = 10 << 20;  // below: a kLargeBuffer segment
  static constexpr std::int64_t kLargeBuffer = 20 << 20;
  static constexpr std::int64_t kRoundLarge = 2 << 20;  // rounding of big segments
  static constexpr int kMaxStreams = 4;

  // A live allocation: the index of its block record, so release() needs no search.
  struct Handle {
    std::int32_t block = -1;
  };

  // The block size a request of `bytes` occupies (>= 512, a multiple of 512).
  static std::int64_t round_size(std::int64_t bytes);
  // The segment size reserved when no cached block fits a rounded request of `size`.
  static std::int64_t segment_size(std::int64_t size);

  // Serves `bytes` on `stream` (0 <= stream < kMaxStreams, FSDP_CHECKed) from the best-fitting
  // cached block of that stream's pool, or from a new segment. bytes <= 0 gets a 512 B block.
  // Inline: the simulator calls it for every alloc op, and most find a cached block of exactly
  // their size (the best fit, which cannot be split); the rest take allocate_uncached.
  Handle allocate(int stream, std::int64_t bytes);
  // Returns the block to its pool, merged with free neighbours (whose records are recycled);
  // FSDP_CHECKs the handle is live. Inline for the same reason: most blocks have no free
  // neighbour; the others take release_merging.
  void release(Handle handle);

  std::int64_t reserved_bytes() const { return reserved_; }    // sum of segment sizes
  std::int64_t allocated_bytes() const { return allocated_; }  // sum of live block sizes
  // Free blocks cached in all pools.
  std::size_t cached_blocks() const {
    std::size_t n = 0;
    for (const Pool& p : pools_) {
      for (const SizeClass& c : p.classes) {
        n += c.blocks.size();
      }
    }
    return n;
  }

  // Where a live allocation lies: its segment (numbered in creation order), offset in it and
  // block size. FSDP_CHECKs the handle is live. For tests and diagnostics.
  struct Placement {
    std::int32_t segment = 0;
    std::int64_t offset = 0;
    std::int64_t size = 0;
    friend bool operator==(const Placement&, const Placement&) = default;
  };
  Placement placement(Handle handle) const;

 private:
  enum class BlockState : std::uint8_t { kFree, kLive, kRecycled };
  // The blocks of a segment form a doubly linked list by offset that covers the segment.
  // A block keeps its address and pool so that caching and uncaching it read no segment record.
  struct Block {
    std::int64_t address = 0;  // segment base + offset in the segment
    std::int64_t size = 0;
    std::int32_t segment = 0;
    std::int32_t prev = -1;  // block records, -1 at the segment's ends
    std::int32_t next = -1;
    BlockState state = BlockState::kFree;
    std::uint8_t pool = 0;  // index into pools_: stream * 2 + small
  };
  static_assert(sizeof(Block) == 32);
  struct Segment {
    // Where the segment starts if all segments lay end to end in creation order, so that the
    // (segment, offset) order of blocks is the order of their addresses, base + offset.
    std::int64_t base = 0;
  };
  // A cached block, 16 bytes: its address and record.
  struct FreeEntry {
    std::int64_t address = 0;
    std::int32_t block = 0;
  };
  // The cached blocks of one size in a pool, by descending address: the best of them (lowest
  // segment, then offset) is at the back, where taking it moves nothing.
  struct SizeClass {
    std::int64_t size = 0;
    std::vector<FreeEntry> blocks;
  };
  // A pool: its size classes by ascending size, so PyTorch's best-fit order (size, segment,
  // offset) is class order, then address order within a class. A pool holds few distinct sizes
  // (FSDP frees the same buffer sizes over and over) but many blocks of one size. A class that
  // empties stays (it is usually refilled soon); empty classes are dropped when a pool would
  // exceed kMaxClasses (a pool whose classes all hold blocks may exceed it). An open-addressing
  // index finds a class by its exact size in one or two probes, which serves every free and merge
  // and most allocations (a request whose own size has cached blocks); only the rest search the
  // ordered classes, as do all lookups of a pool with more than kIndexSlots / 2 classes.
  static constexpr std::size_t kMaxClasses = 32;
  static constexpr std::size_t kIndexSlots = 64;  // a power of two, 2 * kMaxClasses
  struct Pool {
    std::vector<SizeClass> classes;
    bool indexed = true;  // classes.size() <= kIndexSlots / 2, and the slots index them
    std::array<std::int64_t, kIndexSlots> slot_size{};  // 0: an empty slot (sizes are >= 512)
    std::array<std::int32_t, kIndexSlots> slot_class{};
    // The last request that found no cached block of its exact size, and the first class at
    // least as large: FSDP repeats the same split (a buffer cut from a slightly larger block) on
    // every layer. Depends on the class sizes only, so reindex() forgets it.
    std::int64_t memo_size = 0;
    std::size_t memo_first = 0;
  };
  // The first class of `classes` whose size is >= `size`.
  static std::vector<SizeClass>::iterator first_class(std::vector<SizeClass>& classes,
                                                      std::int64_t size);
  // The index of the class of exactly `size` in `pool`, or -1.
  static std::int32_t find_class(const Pool& pool, std::int64_t size);
  // find_class for a pool with too many classes for its index: a binary search.
  [[gnu::noinline]] static std::int32_t find_class_unindexed(const Pool& pool, std::int64_t size);
  // The index's home slot of a size.
  static std::size_t home_slot(std::int64_t size);
  // Rebuilds the index after classes were inserted or erased.
  static void reindex(Pool& pool);
  // Inserts an empty class of `size` (absent from `pool`) and returns its index.
  [[gnu::noinline]] static std::int32_t add_class(Pool& pool, std::int64_t size);
  // allocate() of a rounded `size` from pool `pool` when no cached block has exactly that size:
  // a larger cached block, split if enough remains, or a new segment.
  [[gnu::noinline]] Handle allocate_uncached(std::uint8_t pool, std::int64_t size);
  // release() of block `b` (already marked free and uncounted) that has a free neighbour.
  [[gnu::noinline]] void release_merging(std::int32_t b);
  std::int32_t new_block(const Block& block);
  void recycle(std::int32_t b);
  void add_free(std::int32_t b);
  // Inserts `entry` into `blocks` (by descending address) where it is not the lowest address.
  [[gnu::noinline]] static void insert_free(std::vector<FreeEntry>& blocks, FreeEntry entry);
  void remove_free(std::int32_t b);

  std::vector<Block> blocks_;
  std::vector<std::int32_t> recycled_;  // block records free for reuse
  std::vector<Segment> segments_;
  std::array<Pool, 2 * kMaxStreams> pools_;
  std::int64_t reserved_ = 0;
  std::int64_t allocated_ = 0;
};

inline std::int64_t CachingAllocator::round_size(std::int64_t bytes) {
  if (bytes < kMinBlockSize) {
    return kMinBlockSize;
  }
  return kMinBlockSize * ((bytes + kMinBlockSize - 1) / kMinBlockSize);
}

// Fibonacci hashing of the size's upper bits; sizes are multiples of 512.
inline std::size_t CachingAllocator::home_slot(std::int64_t size) {
  return static_cast<std::size_t>((static_cast<std::uint64_t>(size) * 0x9E3779B97F4A7C15ULL) >>
                                  (64 - std::countr_zero(kIndexSlots)));
}

inline std::int32_t CachingAllocator::find_class(const Pool& pool, std::int64_t size) {
  if (!pool.indexed) [[unlikely]] {
    return find_class_unindexed(pool, size);
  }
  for (std::size_t i = home_slot(size);; i = (i + 1) % kIndexSlots) {
    const std::int64_t s = pool.slot_size[i];
    if (s == size) {
      return pool.slot_class[i];
    }
    if (s == 0) {
      return -1;
    }
  }
}

inline void CachingAllocator::add_free(std::int32_t b) {
  const Block& block = blocks_[static_cast<std::size_t>(b)];
  const FreeEntry entry{block.address, b};
  Pool& p = pools_[block.pool];
  std::int32_t k = find_class(p, block.size);
  if (k < 0) [[unlikely]] {
    k = add_class(p, block.size);
  }
  std::vector<FreeEntry>& v = p.classes[static_cast<std::size_t>(k)].blocks;
  // Usually the lowest address of its size (blocks are reused from the back): it goes last.
  if (v.empty() || v.back().address > entry.address) [[likely]] {
    v.push_back(entry);
    return;
  }
  insert_free(v, entry);
}

inline CachingAllocator::Handle CachingAllocator::allocate(int stream, std::int64_t bytes) {
  FSDP_CHECK(stream >= 0 && stream < kMaxStreams) << "stream " << stream;
  const std::int64_t size = round_size(bytes);
  const std::uint8_t pool = static_cast<std::uint8_t>(stream * 2 + (size <= kSmallSize ? 1 : 0));
  Pool& p = pools_[pool];
  // A cached block of exactly `size` is the best fit (no smaller class holds the request), and
  // the lowest address of its class is at the back; nothing remains to split off.
  if (const std::int32_t k = find_class(p, size); k >= 0) {
    std::vector<FreeEntry>& v = p.classes[static_cast<std::size_t>(k)].blocks;
    if (!v.empty()) {
      const std::int32_t b = v.back().block;
      v.pop_back();
      Block& blk = blocks_[static_cast<std::size_t>(b)];
      FSDP_CHECK(blk.state == BlockState::kFree) << "corrupt pool";
      blk.state = BlockState::kLive;
      allocated_ += size;
      return Handle{b};
    }
  }
  return allocate_uncached(pool, size);
}

inline void CachingAllocator::release(Handle handle) {
  const std::int32_t b = handle.block;
  FSDP_CHECK(b >= 0 && static_cast<std::size_t>(b) < blocks_.size() &&
             blocks_[static_cast<std::size_t>(b)].state == BlockState::kLive)
      << "release of a block that is not live: " << b;
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  allocated_ -= blk.size;
  blk.state = BlockState::kFree;
  const bool next_free =
      blk.next >= 0 && blocks_[static_cast<std::size_t>(blk.next)].state == BlockState::kFree;
  const bool prev_free =
      blk.prev >= 0 && blocks_[static_cast<std::size_t>(blk.prev)].state == BlockState::kFree;
  if (next_free || prev_free) {
    release_merging(b);
    return;
  }
  add_free(b);
}

}  // namespace fsdp::sim
