// SPDX-License-Identifier: Apache-2.0
// HugePageAllocator: a std::allocator-compatible allocator for the layout builder's large
// temporary arrays. Blocks of at least 2 MiB are 2 MiB-aligned and, on Linux, advised as
// transparent-huge-page candidates (MADV_HUGEPAGE), so random accesses over many megabytes miss
// the TLB far less when THP is in `madvise` mode (docs/design/layouts.md §3.6). Smaller blocks and
// other platforms use plain operator new.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace fsdp::internal {

// The size from which blocks are 2 MiB-aligned and advised for huge pages.
inline constexpr std::size_t kHugePageSize = std::size_t{2} << 20;

// Returns a block of `bytes` bytes aligned to 64 bytes, and to kHugePageSize when
// bytes >= kHugePageSize (then rounded up to whole huge pages and advised; a failed madvise is
// ignored). Throws std::bad_alloc on failure. bytes == 0 returns a valid, unique pointer.
void* huge_page_allocate(std::size_t bytes);
// Releases a block from huge_page_allocate(bytes) with the same `bytes`. A large block is kept in
// a per-thread cache (at most 32 blocks and kHugePageCacheBytes) for the next request of the same
// rounded size, which then finds its pages already mapped instead of faulting in fresh zeroed
// ones: a builder called again on inputs of similar size (a sweep, a benchmark) skips the kernel's
// page clearing, about a tenth of a 1M-tensor build. A thread caches once it has made a large
// allocation, and its cache is freed when it exits.
void huge_page_deallocate(void* p, std::size_t bytes) noexcept;

// The most bytes the calling thread's cache keeps.
inline constexpr std::size_t kHugePageCacheBytes = std::size_t{256} << 20;
// Bytes held in the calling thread's cache.
std::size_t huge_page_cache_bytes() noexcept;
// Frees the calling thread's cached blocks (for callers done building layouts, and tests).
void release_huge_page_cache() noexcept;

// Stateless: every instance compares equal. Serves element alignments up to 64 bytes.
template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;

  HugePageAllocator() noexcept = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>& /*other*/) noexcept {}  // NOLINT: rebind

  T* allocate(std::size_t n);
  void deallocate(T* p, std::size_t n) noexcept { huge_page_deallocate(p, n * sizeof(T)); }

  template <typename U>
  bool operator==(const HugePageAllocator<U>& /*other*/) const noexcept {
    return true;
  }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

// Throws std::bad_array_new_length when n * sizeof(T) overflows.
template <typename T>
T* HugePageAllocator<T>::allocate(std::size_t n) {
  static_assert(alignof(T) <= 64, "HugePageAllocator serves alignments up to 64 bytes");
  if (n > static_cast<std::size_t>(-1) / sizeof(T)) {
    throw std::bad_array_new_length();
  }
  return static_cast<T*>(huge_page_allocate(n * sizeof(T)));
}

}  // namespace fsdp::internal
