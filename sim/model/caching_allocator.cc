// SPDX-License-Identifier: Apache-2.0
// A pool is a short list of size classes, each a vector of its cached blocks by descending address
// (see the header): the best fit takes the back of the first non-empty class at least as large,
// moving nothing; a freed block is inserted from the back, past the blocks of its size at lower
// addresses, comparing one integer per step and reading no block record; only the neighbours
// absorbed by a merge are erased from the middle of a class. One sorted vector per pool instead
// paid a search with block-record loads and a memmove on every insert and erase. A class is found
// by its exact size through the pool's hash index, without the search's mispredicted branches.
// Nothing is allocated at steady state. Block records live in one flat array (linked by index,
// recycled after merges), so a handle is an index.
#include "sim/model/caching_allocator.h"

#include <algorithm>
#include <bit>

#include "core/base/check.h"

namespace fsdp::sim {

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

// A branch-free binary search (an allocation without an exact-size block that the pool's memo
// does not answer, and a new class): the data-dependent branches of std::lower_bound were
// mispredicted about half the time when every lookup searched. The loop's trip count depends only
// on the pool's size, and the halving step compiles to a conditional move.
std::vector<CachingAllocator::SizeClass>::iterator CachingAllocator::first_class(
    std::vector<SizeClass>& classes, std::int64_t size) {
  std::size_t n = classes.size();
  if (n == 0) {
    return classes.begin();
  }
  const SizeClass* base = classes.data();
  while (n > 1) {
    const std::size_t half = n / 2;
    base = base[half].size < size ? base + half : base;
    n -= half;
  }
  return classes.begin() + ((base - classes.data()) + (base->size < size ? 1 : 0));
}

std::int32_t CachingAllocator::find_class_unindexed(const Pool& pool, std::int64_t size) {
  const auto& classes = pool.classes;
  const auto c = std::lower_bound(classes.begin(), classes.end(), size,
                                  [](const SizeClass& k, std::int64_t s) { return k.size < s; });
  return c != classes.end() && c->size == size ? static_cast<std::int32_t>(c - classes.begin())
                                               : -1;
}

void CachingAllocator::reindex(Pool& pool) {
  pool.memo_size = 0;
  pool.indexed = pool.classes.size() <= kIndexSlots / 2;
  if (!pool.indexed) {
    return;
  }
  pool.slot_size.fill(0);
  for (std::size_t k = 0; k < pool.classes.size(); ++k) {
    std::size_t i = home_slot(pool.classes[k].size);
    while (pool.slot_size[i] != 0) {
      i = (i + 1) % kIndexSlots;
    }
    pool.slot_size[i] = pool.classes[k].size;
    pool.slot_class[i] = static_cast<std::int32_t>(k);
  }
}

std::int32_t CachingAllocator::add_class(Pool& pool, std::int64_t size) {
  if (pool.classes.size() >= kMaxClasses) {
    std::erase_if(pool.classes, [](const SizeClass& c) { return c.blocks.empty(); });
  }
  const auto c = pool.classes.insert(first_class(pool.classes, size), SizeClass{size, {}});
  const auto k = static_cast<std::int32_t>(c - pool.classes.begin());
  reindex(pool);
  return k;
}

void CachingAllocator::insert_free(std::vector<FreeEntry>& blocks, FreeEntry entry) {
  // Insertion from the back: the blocks of lower address move up one place.
  blocks.push_back(entry);
  std::size_t i = blocks.size() - 1;
  for (; i > 0 && blocks[i - 1].address < entry.address; --i) {
    blocks[i] = blocks[i - 1];
  }
  blocks[i] = entry;
}

void CachingAllocator::remove_free(std::int32_t b) {
  const Block& block = blocks_[static_cast<std::size_t>(b)];
  const std::int64_t address = block.address;
  Pool& p = pools_[block.pool];
  const std::int32_t k = find_class(p, block.size);
  FSDP_CHECK(k >= 0) << "free block missing from its pool";
  std::vector<FreeEntry>& v = p.classes[static_cast<std::size_t>(k)].blocks;
  // A merge usually absorbs the remainder split off by the allocation being released, which the
  // split cached last, at the lowest address of its size, unless a lower one was cached since.
  if (!v.empty() && v.back().block == b) {
    v.pop_back();
    return;
  }
  const auto it =
      std::lower_bound(v.begin(), v.end(), address,
                       [](const FreeEntry& e, std::int64_t a) { return e.address > a; });
  FSDP_CHECK(it != v.end() && it->block == b) << "free block missing from its pool";
  v.erase(it);
}

CachingAllocator::Handle CachingAllocator::allocate_uncached(std::uint8_t pool, std::int64_t size) {
  const bool small = size <= kSmallSize;
  Pool& p = pools_[pool];
  // Best fit: the smallest cached block of this stream's pool that holds the request, the lowest
  // address among the blocks of that size. No class of exactly `size` holds a block.
  if (p.memo_size != size) {
    p.memo_size = size;
    p.memo_first = static_cast<std::size_t>(first_class(p.classes, size) - p.classes.begin());
  }
  auto c = p.classes.begin() + static_cast<std::ptrdiff_t>(p.memo_first);
  while (c != p.classes.end() && c->blocks.empty()) {
    ++c;
  }
  SizeClass* const fit = c != p.classes.end() ? &*c : nullptr;
  std::int32_t b = 0;
  if (fit != nullptr) {
    b = fit->blocks.back().block;
    fit->blocks.pop_back();
  } else {
    const std::int32_t seg = static_cast<std::int32_t>(segments_.size());
    const std::int64_t segment_bytes = segment_size(size);
    segments_.push_back(Segment{/*base=*/reserved_});
    reserved_ += segment_bytes;
    b = new_block(Block{/*address=*/segments_.back().base, segment_bytes, seg, -1, -1,
                        BlockState::kFree, pool});
  }
  FSDP_CHECK(blocks_[static_cast<std::size_t>(b)].state == BlockState::kFree) << "corrupt pool";
  const std::int64_t block_size = blocks_[static_cast<std::size_t>(b)].size;
  const std::int64_t remaining = block_size - size;
  // PyTorch splits small blocks when at least a minimum block remains, large ones only when more
  // than the small-size threshold does (so a large block is never cut into small slivers).
  const bool split = small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (split) {
    const Block& blk = blocks_[static_cast<std::size_t>(b)];
    const std::int32_t rest =
        new_block(Block{blk.address + size, remaining, blk.segment, b, blk.next, BlockState::kFree,
                        blk.pool});
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

void CachingAllocator::release_merging(std::int32_t b) {
  Block& blk = blocks_[static_cast<std::size_t>(b)];
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

CachingAllocator::Placement CachingAllocator::placement(Handle handle) const {
  const std::int32_t b = handle.block;
  FSDP_CHECK(b >= 0 && static_cast<std::size_t>(b) < blocks_.size() &&
             blocks_[static_cast<std::size_t>(b)].state == BlockState::kLive)
      << "placement of a block that is not live: " << b;
  const Block& blk = blocks_[static_cast<std::size_t>(b)];
  return Placement{blk.segment,
                   blk.address - segments_[static_cast<std::size_t>(blk.segment)].base, blk.size};
}

}  // namespace fsdp::sim
