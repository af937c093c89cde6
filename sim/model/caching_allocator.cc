// SPDX-License-Identifier: Apache-2.0
// The pools are sorted vectors: a rank holds tens of live buffers, so a linear insert into a small
// contiguous vector beats a node-based std::set and allocates nothing at steady state.
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

void CachingAllocator::add_free(int stream, bool small, FreeKey key) {
  auto& p = pool(stream, small);
  p.insert(std::lower_bound(p.begin(), p.end(), key), key);
}

void CachingAllocator::remove_free(int stream, bool small, FreeKey key) {
  auto& p = pool(stream, small);
  const auto it = std::lower_bound(p.begin(), p.end(), key);
  FSDP_CHECK(it != p.end() && *it == key) << "free block missing from its pool";
  p.erase(it);
}

CachingAllocator::Handle CachingAllocator::allocate(int stream, std::int64_t bytes) {
  FSDP_CHECK(stream >= 0 && stream < kMaxStreams) << "stream " << stream;
  const std::int64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  auto& p = pool(stream, small);
  // Best fit: the smallest cached block of this stream's pool that holds the request.
  const auto it = std::lower_bound(p.begin(), p.end(), FreeKey{size, -1, -1});
  std::int32_t seg = 0;
  std::int64_t offset = 0;
  std::int64_t block_size = 0;
  if (it != p.end()) {
    seg = it->segment;
    offset = it->offset;
    block_size = it->size;
    p.erase(it);
  } else {
    seg = static_cast<std::int32_t>(segments_.size());
    block_size = segment_size(size);
    Segment s;
    s.stream = stream;
    s.small = small;
    s.blocks.push_back(Block{0, block_size, true});
    segments_.push_back(std::move(s));
    reserved_ += block_size;
  }
  auto& blocks = segments_[static_cast<std::size_t>(seg)].blocks;
  auto bt = std::lower_bound(blocks.begin(), blocks.end(), offset,
                             [](const Block& b, std::int64_t o) { return b.offset < o; });
  FSDP_CHECK(bt != blocks.end() && bt->offset == offset && bt->free) << "corrupt segment";
  const std::int64_t remaining = block_size - size;
  // PyTorch splits small blocks when at least a minimum block remains, large ones only when more
  // than the small-size threshold does (so a large block is never cut into small slivers).
  const bool split = small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  bt->free = false;
  if (split) {
    bt->size = size;
    const Block rest{offset + size, remaining, true};
    blocks.insert(bt + 1, rest);
    add_free(stream, small, FreeKey{rest.size, seg, rest.offset});
  }
  allocated_ += split ? size : block_size;
  return Handle{seg, offset};
}

void CachingAllocator::release(Handle handle) {
  FSDP_CHECK(handle.segment >= 0 && static_cast<std::size_t>(handle.segment) < segments_.size())
      << "segment " << handle.segment;
  Segment& s = segments_[static_cast<std::size_t>(handle.segment)];
  auto& blocks = s.blocks;
  auto bt = std::lower_bound(blocks.begin(), blocks.end(), handle.offset,
                             [](const Block& b, std::int64_t o) { return b.offset < o; });
  FSDP_CHECK(bt != blocks.end() && bt->offset == handle.offset && !bt->free)
      << "release of a block that is not live";
  allocated_ -= bt->size;
  bt->free = true;
  std::size_t i = static_cast<std::size_t>(bt - blocks.begin());
  if (i + 1 < blocks.size() && blocks[i + 1].free) {
    remove_free(s.stream, s.small, FreeKey{blocks[i + 1].size, handle.segment, blocks[i + 1].offset});
    blocks[i].size += blocks[i + 1].size;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
  if (i > 0 && blocks[i - 1].free) {
    remove_free(s.stream, s.small, FreeKey{blocks[i - 1].size, handle.segment, blocks[i - 1].offset});
    blocks[i - 1].size += blocks[i].size;
    blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
  }
  add_free(s.stream, s.small, FreeKey{blocks[i].size, handle.segment, blocks[i].offset});
}

}  // namespace fsdp::sim
