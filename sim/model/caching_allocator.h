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
#include <cstdint>
#include <vector>

namespace fsdp::sim {

class CachingAllocator {
 public:
  static constexpr std::int64_t kMinBlockSize = 512;
  static constexpr std::int64_t kSmallSize = 1 << 20;         // largest small-pool request
  static constexpr std::int64_t kSmallBuffer = 2 << 20;       // small-pool segment
  static constexpr std::int64_t kMinLargeAlloc = 10 << 20;    // below: a kLargeBuffer segment
  static constexpr std::int64_t kLargeBuffer = 20 << 20;
  static constexpr std::int64_t kRoundLarge = 2 << 20;        // rounding of big segments
  static constexpr int kMaxStreams = 4;

  // Where a live allocation sits.
  struct Handle {
    std::int32_t segment = -1;
    std::int64_t offset = 0;
  };

  // The block size a request of `bytes` occupies (>= 512, a multiple of 512).
  static std::int64_t round_size(std::int64_t bytes);
  // The segment size reserved when no cached block fits a rounded request of `size`.
  static std::int64_t segment_size(std::int64_t size);

  // Serves `bytes` on `stream` (0 <= stream < kMaxStreams, FSDP_CHECKed) from the best-fitting
  // cached block of that stream's pool, or from a new segment. bytes <= 0 gets a 512 B block.
  Handle allocate(int stream, std::int64_t bytes);
  // Returns the block to its pool, merged with free neighbours; FSDP_CHECKs the handle is live.
  void release(Handle handle);

  std::int64_t reserved_bytes() const { return reserved_; }    // sum of segment sizes
  std::int64_t allocated_bytes() const { return allocated_; }  // sum of live block sizes

 private:
  struct Block {
    std::int64_t offset = 0;
    std::int64_t size = 0;
    bool free = false;
  };
  struct Segment {
    int stream = 0;
    bool small = false;
    std::vector<Block> blocks;  // by offset, covering the segment
  };
  struct FreeKey {
    std::int64_t size = 0;
    std::int32_t segment = 0;
    std::int64_t offset = 0;
    friend auto operator<=>(const FreeKey&, const FreeKey&) = default;
  };
  std::vector<FreeKey>& pool(int stream, bool small) {
    return pools_[static_cast<std::size_t>(stream * 2 + (small ? 1 : 0))];
  }
  void add_free(int stream, bool small, FreeKey key);
  void remove_free(int stream, bool small, FreeKey key);

  std::vector<Segment> segments_;
  std::array<std::vector<FreeKey>, 2 * kMaxStreams> pools_;  // sorted (size, segment, offset)
  std::int64_t reserved_ = 0;
  std::int64_t allocated_ = 0;
};

}  // namespace fsdp::sim
