// SPDX-License-Identifier: Apache-2.0
#include "core/layout/internal/huge_page_allocator.h"

#include <cstdint>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace fsdp::internal {

namespace {

constexpr std::align_val_t kSmallAlign{64};
constexpr std::align_val_t kHugeAlign{kHugePageSize};

std::size_t round_to_huge_pages(std::size_t bytes) {
  return (bytes + kHugePageSize - 1) / kHugePageSize * kHugePageSize;
}

// The per-thread cache of released large blocks. It is trivially destructible, so it can be read
// at any point of the thread's exit; the blocks it holds are freed by a Flusher, a thread_local
// with a destructor that the thread constructs on its first large allocation. A thread whose
// Flusher has not been constructed, or has run, caches nothing: a block released during static
// destruction (after the main thread's thread_locals are gone) goes straight back to the heap.
struct BlockCache {
  static constexpr int kMaxBlocks = 32;
  void* block[kMaxBlocks];
  std::size_t size[kMaxBlocks];  // rounded to whole huge pages
  int count;
  std::size_t bytes;
  bool open;    // the Flusher exists
  bool closed;  // the Flusher has run
};
constinit thread_local BlockCache t_cache{};

void flush(BlockCache& cache) noexcept {
  for (int i = 0; i < cache.count; ++i) {
    ::operator delete(cache.block[i], kHugeAlign);
  }
  cache.count = 0;
  cache.bytes = 0;
}

struct Flusher {
  Flusher() { t_cache.open = true; }
  ~Flusher() {
    flush(t_cache);
    t_cache.closed = true;
  }
};

void open_cache() {
  thread_local Flusher flusher;
  (void)flusher;
}

// A cached block of exactly `size` bytes (rounded), or nullptr.
void* take_cached(std::size_t size) noexcept {
  BlockCache& c = t_cache;
  for (int i = c.count - 1; i >= 0; --i) {
    if (c.size[i] == size) {
      void* p = c.block[i];
      c.bytes -= size;
      --c.count;
      c.block[i] = c.block[c.count];
      c.size[i] = c.size[c.count];
      return p;
    }
  }
  return nullptr;
}

// Keeps the block if the cache is open and has room.
bool keep_cached(void* p, std::size_t size) noexcept {
  BlockCache& c = t_cache;
  if (!c.open || c.closed || c.count == BlockCache::kMaxBlocks ||
      c.bytes + size > kHugePageCacheBytes) {
    return false;
  }
  c.block[c.count] = p;
  c.size[c.count] = size;
  ++c.count;
  c.bytes += size;
  return true;
}

}  // namespace

// Large blocks come from 2 MiB-aligned operator new, rounded up to whole huge pages, and are
// advised MADV_HUGEPAGE on Linux: with THP in `madvise` mode the pages malloc maps fresh fault in
// as huge pages; pages it recycles keep their size until khugepaged collapses them. A variant with
// a private mapping per block (always fresh memory) measured no faster (layouts.md §3.6).
void* huge_page_allocate(std::size_t bytes) {
  if (bytes < kHugePageSize) {
    return ::operator new(bytes == 0 ? 1 : bytes, kSmallAlign);
  }
  if (bytes > static_cast<std::size_t>(-1) - kHugePageSize) {
    throw std::bad_alloc();
  }
  const std::size_t size = round_to_huge_pages(bytes);
  open_cache();
  if (void* cached = take_cached(size)) {
    return cached;
  }
  void* p = ::operator new(size, kHugeAlign);
#if defined(__linux__)
  (void)madvise(p, size, MADV_HUGEPAGE);  // a hint: without THP the block still works
#endif
  return p;
}

void huge_page_deallocate(void* p, std::size_t bytes) noexcept {
  if (bytes < kHugePageSize) {
    ::operator delete(p, kSmallAlign);
    return;
  }
  if (!keep_cached(p, round_to_huge_pages(bytes))) {
    ::operator delete(p, kHugeAlign);
  }
}

std::size_t huge_page_cache_bytes() noexcept {
  return t_cache.bytes;
}

void release_huge_page_cache() noexcept {
  flush(t_cache);
}

}  // namespace fsdp::internal
