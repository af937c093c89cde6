// SPDX-License-Identifier: Apache-2.0
// The pools are sorted vectors: a rank holds tens of live buffers, so a linear insert into a small
// contiguous vector beats a node-based std::set and allocates nothing at steady state. Block
// records live in one flat array (linked by index, recycled after merges), so a handle is an index
// and copying an allocator copies a few flat vectors.
#include "sim/model/caching_allocator.h"

#include <algorithm>

#include "core/base/check.h"

namespace fsdp::sim {

std::int64_t CachingAllocator::round_size(std::int64_t bytes) {
  if (bytes < kMinBlockSize) {
    return kMinBlockSize;
  }
  return kMinBlockSize * ((bytes + kMinBlockSize - 1) / kMinBlockSize);
}

std::int64_t CachingAllocator::segment_size(std::int64_t size) {
  if (size <= kSmallSize) {
    return kSmallBuffer;
  }
  if (size < kMinLargeAlloc) {
    return kLargeBuffer;
  }
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

std::int32_t CachingAllocator::new_block(const Block& block) {
  if (!recycled_.empty()) {
    const std::int32_t b = recycled_.back();
    recycled_.pop_back();
    blocks_[static_cast<std::size_t>(b)] = block;
    return b;
  }
  blocks_.push_back(block);
  return static_cast<std::int32_t>(blocks_.size() - 1);
}

void CachingAllocator::recycle(std::int32_t b) {
  blocks_[static_cast<std::size_t>(b)].state = BlockState::kRecycled;
  recycled_.push_back(b);
}

void CachingAllocator::add_free(std::int32_t b) {
  const FreeKey key = key_of(b);
  auto& p = pool(key.segment);
  const auto less = [this](const FreeKey& x, const FreeKey& y) { return before(x, y); };
  p.insert(std::lower_bound(p.begin(), p.end(), key, less), key);
}

void CachingAllocator::remove_free(std::int32_t b) {
  const FreeKey key = key_of(b);
  auto& p = pool(key.segment);
  const auto less = [this](const FreeKey& x, const FreeKey& y) { return before(x, y); };
  const auto it = std::lower_bound(p.begin(), p.end(), key, less);
  FSDP_CHECK(it != p.end() && it->block == b) << "free block missing from its pool";
  p.erase(it);
}

CachingAllocator::Handle CachingAllocator::allocate(int stream, std::int64_t bytes) {
  FSDP_CHECK(stream >= 0 && stream < kMaxStreams) << "stream " << stream;
  const std::int64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  auto& p = pools_[static_cast<std::size_t>(stream * 2 + (small ? 1 : 0))];
  // Best fit: the smallest cached block of this stream's pool that holds the request.
  // Segment -1 sorts before every block of `size`, so the offset is never consulted.
  const auto it = std::lower_bound(p.begin(), p.end(), FreeKey{size, -1, -1},
                                   [this](const FreeKey& x, const FreeKey& y) { return before(x, y); });
  std::int32_t b = 0;
  if (it != p.end()) {
    b = it->block;
    p.erase(it);
  } else {
    const std::int32_t seg = static_cast<std::int32_t>(segments_.size());
    const std::int64_t segment_bytes = segment_size(size);
    segments_.push_back(Segment{stream, small});
    reserved_ += segment_bytes;
    b = new_block(Block{0, segment_bytes, seg, -1, -1, BlockState::kFree});
  }
  FSDP_CHECK(blocks_[static_cast<std::size_t>(b)].state == BlockState::kFree) << "corrupt pool";
  const std::int64_t block_size = blocks_[static_cast<std::size_t>(b)].size;
  const std::int64_t remaining = block_size - size;
  // PyTorch splits small blocks when at least a minimum block remains, large ones only when more
  // than the small-size threshold does (so a large block is never cut into small slivers).
  const bool split = small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    const Block& blk = blocks_[static_cast<std::size_t>(b)];
    const std::int32_t rest = new_block(
        Block{blk.offset + size, remaining, blk.segment, b, blk.next, BlockState::kFree});
    Block& cut = blocks_[static_cast<std::size_t>(b)];  // new_block may have moved the records
    if (cut.next >= 0) {
      blocks_[static_cast<std::size_t>(cut.next)].prev = rest;
    }
    cut.next = rest;
    cut.size = size;
    add_free(rest);
  }
  blocks_[static_cast<std::size_t>(b)].state = BlockState::kLive;
  allocated_ += split ? size : block_size;
  return Handle{b};
}

void CachingAllocator::release(Handle handle) {
  std::int32_t b = handle.block;
  FSDP_CHECK(b >= 0 && static_cast<std::size_t>(b) < blocks_.size() &&
             blocks_[static_cast<std::size_t>(b)].state == BlockState::kLive)
      << "release of a block that is not live: " << b;
  Block& blk = blocks_[static_cast<std::size_t>(b)];
  allocated_ -= blk.size;
  blk.state = BlockState::kFree;
  if (const std::int32_t n = blk.next;
      n >= 0 && blocks_[static_cast<std::size_t>(n)].state == BlockState::kFree) {
    remove_free(n);
    const Block& next = blocks_[static_cast<std::size_t>(n)];
    blk.size += next.size;
    blk.next = next.next;
    if (next.next >= 0) {
      blocks_[static_cast<std::size_t>(next.next)].prev = b;
    }
    recycle(n);
  }
  if (const std::int32_t q = blk.prev;
      q >= 0 && blocks_[static_cast<std::size_t>(q)].state == BlockState::kFree) {
    remove_free(q);
    Block& prev = blocks_[static_cast<std::size_t>(q)];
    prev.size += blk.size;
    prev.next = blk.next;
    if (blk.next >= 0) {
      blocks_[static_cast<std::size_t>(blk.next)].prev = q;
    }
    recycle(b);
    b = q;
  }
  add_free(b);
}

}  // namespace fsdp::sim
