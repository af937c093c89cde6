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
  void* p = ::operator new(size, kHugeAlign);
#if defined(__linux__)
  (void)madvise(p, size, MADV_HUGEPAGE);  // a hint: without THP the block still works
#endif
  return p;
}

void huge_page_deallocate(void* p, std::size_t bytes) noexcept {
  ::operator delete(p, bytes < kHugePageSize ? kSmallAlign : kHugeAlign);
}

}  // namespace fsdp::internal
